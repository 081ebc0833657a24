"""The observation record of the white-box audit: what was seen in each step of one training run.

Filled by :mod:`privaudit.hooks` (opacus's ``DPOptimizer``) and :mod:`privaudit.train.observe` (the
batched trainer), read by the estimator :func:`privaudit.stats.whitebox.estimate_whitebox`
(Nasr et al. 2023 threat model; the record holds sufficient statistics of the noise, never the noise).
numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["RunObservations"]


def _readonly(a: NDArray[Any]) -> NDArray[Any]:
    a = np.array(a, copy=True)
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class RunObservations:
    """What :mod:`privaudit.hooks` saw in one training run (T observed steps, d noise coordinates).

    Attributes:
        batch_rows: (T,) per-example gradient rows clipped at each step (``B_t``; the canary
            excluded; summed over virtual steps when opacus accumulates).
        sensitivity: (T,) ``Δ_t = ‖S(data + canary) − S(data)‖₂`` of the clipped sums; NaN where
            the hook could not measure it.
        noise_sq: (T,) ``‖N_t‖²``.
        noise_quartic: (T,) ``Σ_j N_tj⁴``.
        noise_cos: (T,) ``cos(N_{t−1}, N_t)``; NaN at t = 0 or when a norm is 0.
        coord_sq: (d,) ``Σ_t N_tj²`` per coordinate.
        declared_dataset_size: what the trainer passed to ``hooks.watch`` (not trusted).
        declared_noise_multiplier: the optimizer's ``noise_multiplier`` attribute (not trusted).
        declared_max_grad_norm: the optimizer's ``max_grad_norm`` (the C of the canary).
        noise_scale: (T,) the optimizer's declared noise standard deviation ``σ_t·C_t`` at each
            step (its ``noise_multiplier`` × ``max_grad_norm`` when it added the noise; opacus's
            noise and clip schedulers change them). Not trusted: the estimator uses it only as the
            *shape* of the noise across steps, and tests that the observed noise follows it.
            ``None`` when unknown.
        coord_sq_scaled: (d,) ``Σ_t N_tj² / (σ_t C_t)²`` per coordinate (``None`` when some
            declared scale is 0 or unknown).
    """

    batch_rows: NDArray[np.int64]
    sensitivity: NDArray[np.float64]
    noise_sq: NDArray[np.float64]
    noise_quartic: NDArray[np.float64]
    noise_cos: NDArray[np.float64]
    coord_sq: NDArray[np.float64]
    declared_dataset_size: int | None = None
    declared_noise_multiplier: float | None = None
    declared_max_grad_norm: float | None = None
    noise_scale: NDArray[np.float64] | None = None
    coord_sq_scaled: NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        rows = np.asarray(self.batch_rows)
        if rows.ndim != 1 or rows.size < 1:
            raise ValueError(f"batch_rows must be a non-empty 1-D array (one entry per step), got shape {rows.shape}")
        if not np.issubdtype(rows.dtype, np.number) or np.any(rows < 0) or np.any(rows != np.round(rows)):
            raise ValueError("batch_rows must hold non-negative integers (rows per step)")
        T = rows.size
        arrays: dict[str, NDArray[Any]] = {"batch_rows": rows.astype(np.int64)}
        for name in ("sensitivity", "noise_sq", "noise_quartic", "noise_cos"):
            a = np.asarray(getattr(self, name), dtype=np.float64)
            if a.shape != (T,):
                raise ValueError(f"{name} must have shape ({T},) like batch_rows, got {a.shape}")
            arrays[name] = a
        for name in ("noise_sq", "noise_quartic"):
            a = arrays[name]
            if not np.all(np.isfinite(a)) or np.any(a < 0):
                raise ValueError(f"{name} must be finite and >= 0 (a sum of powers of the noise)")
        sens = arrays["sensitivity"]
        if np.any(sens[np.isfinite(sens)] < 0):
            raise ValueError("sensitivity must be >= 0 where measured (NaN where not)")
        cos = arrays["noise_cos"]
        if np.any(np.abs(cos[np.isfinite(cos)]) > 1.0 + 1e-9):
            raise ValueError("noise_cos must lie in [-1, 1] (NaN where undefined)")
        arrays["noise_cos"] = np.clip(cos, -1.0, 1.0)
        coord = np.asarray(self.coord_sq, dtype=np.float64)
        if coord.ndim != 1 or coord.size < 2:
            raise ValueError(f"coord_sq must be a 1-D array over d >= 2 noise coordinates, got shape {coord.shape}")
        if not np.all(np.isfinite(coord)) or np.any(coord < 0):
            raise ValueError("coord_sq must be finite and >= 0")
        arrays["coord_sq"] = coord
        if self.noise_scale is not None:
            scale = np.asarray(self.noise_scale, dtype=np.float64)
            if scale.shape != (T,) or not np.all(np.isfinite(scale)) or np.any(scale < 0):
                raise ValueError(f"noise_scale must be a ({T},) array of finite values >= 0 (σ_t·C_t per step), "
                                 f"got shape {scale.shape}")
            arrays["noise_scale"] = scale
        if self.coord_sq_scaled is not None:
            cs = np.asarray(self.coord_sq_scaled, dtype=np.float64)
            if cs.shape != coord.shape or not np.all(np.isfinite(cs)) or np.any(cs < 0):
                raise ValueError(f"coord_sq_scaled must be a finite ({coord.size},) array >= 0 like coord_sq")
            if self.noise_scale is None:
                raise ValueError("coord_sq_scaled needs noise_scale (the per-step scales it is divided by)")
            arrays["coord_sq_scaled"] = cs
        for name, a in arrays.items():
            object.__setattr__(self, name, _readonly(a))

    @property
    def steps(self) -> int:
        """Number of observed steps T."""
        return int(self.batch_rows.size)

    @property
    def dimension(self) -> int:
        """Number of noise coordinates d (trainable parameters)."""
        return int(self.coord_sq.size)

    @classmethod
    def from_noise(cls, noise: ArrayLike, batch_rows: ArrayLike, sensitivity: ArrayLike | float,
                   noise_scale: ArrayLike | None = None, **declared: Any) -> "RunObservations":
        """Summaries of an explicit (T, d) noise matrix (simulations, tests); ``noise_scale`` (T,)
        is the declared σ_t·C_t per step (also gives ``coord_sq_scaled``).

        >>> obs = RunObservations.from_noise(np.ones((3, 4)), [5, 6, 7], 1.0)
        >>> obs.steps, obs.dimension, float(obs.noise_sq[0]), float(obs.noise_cos[1])
        (3, 4, 4.0, 1.0)
        """
        N = np.asarray(noise, dtype=np.float64)
        if N.ndim != 2:
            raise ValueError(f"noise must be a (T, d) matrix, got shape {N.shape}")
        sq = (N * N).sum(axis=1)
        norms = np.sqrt(sq)
        cos = np.full(N.shape[0], np.nan)
        if N.shape[0] > 1:
            dots = (N[1:] * N[:-1]).sum(axis=1)
            den = norms[1:] * norms[:-1]
            with np.errstate(invalid="ignore", divide="ignore"):
                cos[1:] = np.where(den > 0, dots / np.where(den > 0, den, 1.0), np.nan)
        sens = np.broadcast_to(np.asarray(sensitivity, dtype=np.float64), (N.shape[0],))
        scale = scaled = None
        if noise_scale is not None:
            scale = np.broadcast_to(np.asarray(noise_scale, dtype=np.float64), (N.shape[0],))
            if np.all(scale > 0):
                scaled = ((N / scale[:, None]) ** 2).sum(axis=0)
        return cls(batch_rows=np.asarray(batch_rows), sensitivity=sens, noise_sq=sq,
                   noise_quartic=(N ** 4).sum(axis=1), noise_cos=cos, coord_sq=(N * N).sum(axis=0),
                   noise_scale=scale, coord_sq_scaled=scaled, **declared)
