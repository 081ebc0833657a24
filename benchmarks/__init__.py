"""Benchmarks of privaudit (scripts; results and the machines they ran on: docs/results.md), run as ``python -m benchmarks.<name>``. The trainers and
simulations they share with the tests are ``privaudit.testing``."""
