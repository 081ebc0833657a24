"""Tests of the audit report, the release gate and the verdict CLI."""
