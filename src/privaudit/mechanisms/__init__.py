"""Reference mechanisms with known privacy, used to self-check the auditors ("known-epsilon" mode)."""

from .gaussian import (
    gaussian_dp_delta,
    gaussian_mechanism_sigma,
    simulate_gaussian_audit,
    simulate_gaussian_scores,
)

__all__ = [
    "gaussian_dp_delta",
    "gaussian_mechanism_sigma",
    "simulate_gaussian_audit",
    "simulate_gaussian_scores",
]
