"""Benchmarks of privaudit (scripts; see README "Tests"), run as ``python -m benchmarks.<name>``. The trainers and
simulations they share with the tests are ``privaudit.testing``."""
