"""One thread for a fit: torch's intra-op threads and every BLAS/OpenMP pool, restored afterwards.

Every audit fit runs so (LTU reference models and retrain mocks, the one-run and white-box audits' training runs,
the plan's timing of the gradient pass): a scikit-learn fit's sums are then added in one order, so its bits do not
depend on the machine's core count, and a small fit does not pay for idle threads (a digits logistic regression:
0.99 s on 2 cores' default threads, 0.04-0.07 s on one). threadpoolctl limits only the libraries loaded when the
limit is entered, so scipy's own BLAS is loaded first.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["one_thread"]


@contextmanager
def one_thread(torch_too: bool = True) -> Iterator[None]:
    """Run the block on one BLAS/OpenMP thread per pool and (``torch_too``) one torch intra-op thread; the thread
    counts are restored. A stage that sets torch's threads itself (``stages/_runner.py``, which honours
    ``PRIVAUDIT_TORCH_THREADS``) passes ``torch_too=False``."""
    import scipy.linalg  # noqa: F401 — loads scipy's own BLAS, so that the limit below covers it too
    from threadpoolctl import threadpool_limits

    if not torch_too:
        with threadpool_limits(1):
            yield
        return
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(threads)
