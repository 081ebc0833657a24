"""Filters for the two warnings opacus and torch print on every DP-SGD run that say nothing about it.

Both were measured on the default audit (issue 28: 16 ``UserWarning`` lines per ``dvc repro``), traced
to their source, and found to be noise:

- ``Optimal order is the largest alpha`` (``opacus.accountants.analysis.rdp``). With
  ``accountant: prv``, opacus's PRV accountant sizes its discretisation domain with an RDP bound at
  δ/4 and δ/(8·T) (``opacus.accountants.analysis.prv.domain.compute_safe_domain_size``, Gopi et al.
  2021, Remark 5.6). At such small δ the best RDP order lies beyond opacus's fixed order grid, so
  opacus warns that this RDP bound could be tighter: a looser bound only widens the PRV domain
  (the safe direction); the PRV ε and σ do not change. It is filtered only under ``prv``: with
  ``accountant: rdp`` the same warning concerns the RDP ε itself and is kept.
- ``Full backward hook is firing when gradients are computed with respect to module outputs since
  no inputs require gradients`` (torch). ``GradSampleModule`` registers full backward hooks on every
  layer; the first layer's input is the data, which needs no gradient, so torch warns when the hook
  fires. Opacus computes per-sample gradients from the layer's activations and ``grad_output``,
  which the hook receives either way (the batched trainer's agreement with opacus is tested in
  ``tests/train``).

:func:`opacus_noise_filtered` ignores exactly these messages inside its ``with`` block; every other
warning still shows.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["BACKWARD_HOOK_MESSAGE", "PRV_DOMAIN_RDP_MESSAGE", "opacus_noise_filtered"]

#: opacus's RDP order-grid warning, raised inside PRV's domain sizing (see the module doc)
PRV_DOMAIN_RDP_MESSAGE = r"Optimal order is the largest alpha"
#: torch's warning when GradSampleModule's backward hook fires on a layer whose input needs no gradient
BACKWARD_HOOK_MESSAGE = r"Full backward hook is firing when gradients are computed with respect to module outputs"


@contextmanager
def opacus_noise_filtered(accountant: str | None = None) -> Iterator[None]:
    """Ignore the backward-hook warning and, when ``accountant`` is ``"prv"``, opacus's RDP
    order-grid warning (raised only to size PRV's domain); nothing else."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=BACKWARD_HOOK_MESSAGE, category=UserWarning)
        if accountant == "prv":
            warnings.filterwarnings("ignore", message=PRV_DOMAIN_RDP_MESSAGE, category=UserWarning,
                                    module=r"opacus\.accountants\.analysis\.rdp")
        yield
