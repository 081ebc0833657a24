"""Benchmarks of privaudit (scripts; see README "Tests"). A package so that ``benchmarks.planted`` wins over any
site-packages module of the same name."""
