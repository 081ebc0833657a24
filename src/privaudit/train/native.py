"""privaudit's native library, built on first use and called via ctypes: the fused DP-SGD clipped sum of
linear heads (``linear_dp.c``) and DP-SGD's Gaussian noise on the CPU (``gaussian_noise.c``, used by
:mod:`privaudit.train.noise`: one xoshiro256++ stream per model, Box-Muller with its own polynomials;
3-4× faster than ``torch.randn`` on one core here and on torch's threads).

Why a kernel of our own: for M linear heads on a large feature matrix each model's Poisson batch
is a few hundred random rows; torch has no gather-GEMM, so the torch path copies every model's rows
into a buffer (memory-bound, ~10 GB/s here) and then runs 10-wide batched GEMMs on them with a few
dozen small ops per chunk of models. ``linear_dp.c`` reads each sampled row once, straight from the
feature matrix (prefetched two blocks ahead), and computes logits, softmax, the per-example norm
(ghost identity ``‖δ‖·√(‖x‖²+1)``), opacus's clip factor and the clipped sum while the row is in
L1. Measured on 2 AMD EPYC cores (AVX-512, built with ``-mavx2``): 1024 heads on 50 000 × 512,
one step's clipped sum in ~55 ms against ~240–300 ms for the torch chunks (`benchmarks/`).

Why ctypes and not a torch C++ extension: the kernel needs no torch headers, so it compiles in
well under a second with the system C compiler (a torch extension takes ~1 min), and one plain
shared library serves every torch version. Both C files go into one library (one build, one cache key).

**Same numbers everywhere.** The order of every floating-point operation is written out in the C
code (explicit 8-lane accumulators, fixed reduction trees, its own exp polynomial instead of libm's)
and it is compiled with ``-ffp-contract=off`` and without fast-math, so the compiler may vectorise
but not reorder or fuse: results are bit-identical whatever the SIMD width the compiler picks
(checked: SSE2-only, AVX2 and AVX-512 builds; ``tests/train/test_native_kernel.py``) and whatever
the number of threads (models are split between threads; each model is computed by one thread).
The threads are OpenMP's: loaded into a process that has torch, the library binds to torch's own
``libgomp`` and its thread team (a second pool of threads, e.g. Python threads calling the kernel,
fought torch's spinning OpenMP workers for the two cores here).
They differ from the torch path's in the last bits (a different summation order), as two torch
formulations do.

**Build.** ``$CC`` (else Python's configured compiler, else ``cc``) with
``-O3 -std=gnu11 -ffp-contract=off -fno-fast-math -fno-math-errno -fPIC -shared -fopenmp`` (+ ``-mavx512f -DPA_VW=16``
on x86-64 CPUs with AVX-512F: 16-lane loops; else ``-mavx2`` where the CPU has AVX2: the same results,
4× faster than SSE2 here; ``PRIVAUDIT_NATIVE_ISA=avx512|avx2|generic`` picks one; without ``-fopenmp``
if the compiler lacks it: one thread), into ``$PRIVAUDIT_NATIVE_CACHE`` (default
``~/.cache/privaudit/native``) under a hash of the source, the compiler (command and ``--version``)
and the flags, written
atomically (concurrent workers may build at once). ``PRIVAUDIT_NATIVE=0`` turns the kernel off.
When it cannot be built (no compiler) the trainer uses the torch path and warns once.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = ["ISAS", "LinearDpKernel", "linear_dp_kernel", "load_kernel", "unavailable_reason"]

_SOURCES = (Path(__file__).with_name("linear_dp.c"), Path(__file__).with_name("gaussian_noise.c"))
# -fno-math-errno: sqrtf may be the vector instruction (IEEE's correctly rounded square root either way)
_FLAGS = ("-O3", "-std=gnu11", "-ffp-contract=off", "-fno-fast-math", "-fno-math-errno", "-fPIC", "-shared",
          "-Wno-psabi")
_ERRORS = {1: "out of memory", 2: "a label outside [0, n_classes)", 3: "a negative row index"}

_lock = threading.Lock()
_state: dict[str, object] = {}


def _compiler() -> list[str]:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    cmd = shlex.split(str(cc))
    if not cmd or shutil.which(cmd[0]) is None:
        raise OSError(f"no C compiler found (tried {cmd[0] if cmd else cc!r}; set CC to one)")
    return cmd


ISAS = ("auto", "avx512", "avx2", "generic")
"""Builds of the kernel (``PRIVAUDIT_NATIVE_ISA``): ``auto`` (default) picks ``avx512`` where the CPU has
AVX-512F, else ``avx2`` where it has AVX2, else ``generic``. All give the same bits (see the module docstring)."""


def _cpu_flags() -> set[str] | None:
    """The CPU's feature flags from ``/proc/cpuinfo`` (None where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        return None
    return set()


def _isa() -> str:
    """The build to use: ``PRIVAUDIT_NATIVE_ISA`` if set (checked), else the best the CPU has.

    Read from ``/proc/cpuinfo`` where there is one (torch's capability follows ``ATEN_CPU_CAPABILITY``,
    which the Makefile pins, and says nothing of the hardware when pinned)."""
    want = os.environ.get("PRIVAUDIT_NATIVE_ISA", "auto").strip().lower() or "auto"
    if want not in ISAS:
        raise ValueError(f"PRIVAUDIT_NATIVE_ISA={want!r}: expected one of {', '.join(ISAS)}")
    if want != "auto":
        return want
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return "generic"
    flags = _cpu_flags()
    if flags is None:
        cap = torch.backends.cpu.get_cpu_capability()
        return {"AVX512": "avx512", "AVX2": "avx2"}.get(cap, "generic")
    return "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "generic"


def _arch_flags(isa: str | None = None) -> list[str]:
    """Compiler flags of a build: vector width only, the results are the same.

    ``avx512``: ``-mavx512f -DPA_VW=16`` (16-lane loops, two classes per accumulator); ``avx2``:
    ``-mavx2`` (8-lane loops; 16 lanes would spill AVX2's 16 registers: 3× slower here);
    ``generic``: none (SSE2 on x86-64)."""
    isa = _isa() if isa is None else isa
    return {"avx512": ["-mavx512f", "-DPA_VW=16"], "avx2": ["-mavx2"]}.get(isa, [])


def _cache_dir() -> Path:
    root = os.environ.get("PRIVAUDIT_NATIVE_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "privaudit" / "native"


def _compiler_version(cc: list[str]) -> str:
    """``cc --version`` (part of the build's cache key: an upgraded compiler gets a fresh build)."""
    try:
        res = subprocess.run([*cc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        return f"unknown ({err})"
    return res.stdout.strip() or res.stderr.strip()


def _build(isa: str | None = None) -> Path:
    """Compile the kernel (with OpenMP, else without: then one thread) unless already in the cache.

    ``isa``: one of :data:`ISAS` (None: :func:`_isa`); a build the compiler cannot make (AVX-512 on an
    old compiler) falls back to the next narrower one. Cache key: the sources, the compiler command and
    its ``--version``, the flags, the machine."""
    cc = _compiler()
    isa = _isa() if isa is None else isa
    order = ["avx512", "avx2", "generic"]
    tried = order[order.index(isa):] if isa in order else ["generic"]
    version = _compiler_version(cc)
    errors = []
    for arch in dict.fromkeys(tuple(_arch_flags(a)) for a in tried):
        base = [*cc, *_FLAGS, *arch]
        for cmd in ([*base, "-fopenmp"], base):
            key = hashlib.sha256(b"".join(src.read_bytes() for src in _SOURCES)
                                 + "\0".join(cmd + [version, platform.machine(), sys.platform]).encode())
            out = _cache_dir() / key.hexdigest()[:20] / "liblinear_dp.so"
            if out.exists():
                return out
            out.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=out.parent)
            os.close(fd)
            try:
                res = subprocess.run([*cmd, *map(str, _SOURCES), "-o", tmp, "-lm"], capture_output=True, text=True,
                                     timeout=300)
                if res.returncode == 0:
                    os.replace(tmp, out)  # atomic: a concurrent build of the same key writes the same file
                    return out
                errors.append(f"{shlex.join(cmd)}: {res.stderr.strip()[-300:]}")
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
    raise OSError("compiling linear_dp.c failed: " + " | ".join(errors))


@dataclass(frozen=True)
class LinearDpKernel:
    """The loaded library: :meth:`clipped_sum` (``linear_dp.c``) and :meth:`gaussian_fill` (``gaussian_noise.c``)."""

    path: Path
    _fn: ctypes._CFuncPtr  # type: ignore[name-defined]
    _gauss: ctypes._CFuncPtr  # type: ignore[name-defined]

    def gaussian_fill(self, seed: int, out: torch.Tensor, scale: float, threads: int = 1) -> None:
        """Fill ``out`` (M, P) with ``scale`` · N(0, 1), row m from its own stream of ``seed`` (``gaussian_noise.c``).

        ``seed``: any integer in [0, 2⁶⁴); ``out``: a contiguous float32 CPU tensor. ``threads`` split the
        rows; the numbers do not depend on it (nor on the SIMD width of the build)."""
        if out.device.type != "cpu" or out.dtype != torch.float32 or not out.is_contiguous() or out.dim() != 2:
            raise ValueError(f"native gaussian_fill: out must be a contiguous 2-D float32 CPU tensor, got "
                             f"{out.dtype} {tuple(out.shape)} on {out.device}")
        if not 0 <= int(seed) < 2 ** 64:
            raise ValueError(f"native gaussian_fill: seed must lie in [0, 2**64), got {seed}")
        M, P = out.shape
        self._gauss(ctypes.c_uint64(int(seed)), M, P, ctypes.c_float(scale), ctypes.c_void_p(out.data_ptr()),
                    max(1, int(threads)))

    def clipped_sum(self, X: torch.Tensor, y: torch.Tensor, xsq: torch.Tensor,
                    X_extra: torch.Tensor | None, y_extra: torch.Tensor | None, xsq_extra: torch.Tensor | None,
                    idx: torch.Tensor, counts: torch.Tensor, params: torch.Tensor, out: torch.Tensor,
                    max_grad_norm: float, expected_batch_size: float, threads: int = 1) -> None:
        """Write every model's clipped, ``1/expected_batch_size``-scaled gradient sum into ``out`` (M, P).

        ``X`` (n, d) float32, ``y`` (n,) int64, ``xsq`` (n,) ‖x‖²; per-model extra rows ``X_extra``
        (M, E, d), ``y_extra`` / ``xsq_extra`` (M, E) or None; ``idx`` (M, B) int64 virtual rows of
        each model's batch, the first ``counts[m]`` real (rows ≥ n + E, gradient canaries, are
        skipped); ``params`` / ``out`` (M, P) float32 in :meth:`StackedHeads.flat` order with one
        linear layer (P = C·d + C). All on the CPU and contiguous (checked). ``threads`` split the
        models; the numbers do not depend on it.
        """
        M, B = idx.shape
        n, d = X.shape
        P = params.shape[1]
        C = P // (d + 1)
        E = 0 if X_extra is None else int(X_extra.shape[1])
        for name, t, dtype in (("X", X, torch.float32), ("y", y, torch.int64), ("xsq", xsq, torch.float32),
                               ("idx", idx, torch.int64), ("counts", counts, torch.int64),
                               ("params", params, torch.float32), ("out", out, torch.float32),
                               ("X_extra", X_extra, torch.float32), ("y_extra", y_extra, torch.int64),
                               ("xsq_extra", xsq_extra, torch.float32)):
            if t is None and name.endswith("_extra") and not E:
                continue
            if t is None or t.device.type != "cpu" or t.dtype != dtype or not t.is_contiguous():
                raise ValueError(f"native kernel: {name} must be a contiguous {dtype} CPU tensor")
        if P != C * d + C or tuple(out.shape) != (M, P) or params.shape[0] != M or counts.shape != (M,):
            raise ValueError(f"native kernel: shapes do not fit one linear layer (params {tuple(params.shape)}, "
                             f"out {tuple(out.shape)}, X {tuple(X.shape)}, idx {tuple(idx.shape)})")
        ptr = lambda t: None if t is None else ctypes.c_void_p(t.data_ptr())  # noqa: E731
        fixed = (ptr(X), ptr(y), ptr(xsq), n, ptr(X_extra), ptr(y_extra), ptr(xsq_extra), E, d, C,
                 ptr(idx), ptr(counts), B)
        tail = (ptr(params), ptr(out), P, ctypes.c_float(max_grad_norm), ctypes.c_float(expected_batch_size))
        code = self._fn(*fixed, 0, M, *tail, max(1, int(threads)))
        if code:
            raise ValueError(f"native kernel refused its input: {_ERRORS.get(code, f'code {code}')}")


def load_kernel(isa: str | None = None) -> LinearDpKernel:
    """Build (or take from the cache) and load the kernel of build ``isa`` (:data:`ISAS`; None: the
    environment's choice). For benchmarks and tests comparing builds; the trainer uses
    :func:`linear_dp_kernel`. Raises ``OSError`` when it cannot be built."""
    if isa is not None and isa not in ISAS:
        raise ValueError(f"isa={isa!r}: expected one of {', '.join(ISAS)}")
    path = _build(None if isa in (None, "auto") else isa)
    lib = ctypes.CDLL(str(path))
    fn = lib.privaudit_linear_dp_clipped_sum
    fn.restype = ctypes.c_int
    v, i64, f32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_float
    fn.argtypes = [v, v, v, i64, v, v, v, i64, i64, i64, v, v, i64, i64, i64, v, v, i64, f32, f32, i64]
    gauss = lib.privaudit_gaussian_fill
    gauss.restype = ctypes.c_int
    gauss.argtypes = [ctypes.c_uint64, i64, i64, f32, v, i64]
    return LinearDpKernel(path, fn, gauss)


def linear_dp_kernel() -> LinearDpKernel | None:
    """The kernel, built and loaded once per process; None when turned off or it cannot be built
    (:func:`unavailable_reason` says why; the first such call warns)."""
    with _lock:
        if "kernel" in _state:
            return _state["kernel"]  # type: ignore[return-value]
        kernel, reason = None, None
        if os.environ.get("PRIVAUDIT_NATIVE", "1").strip().lower() in ("0", "false", "no", "off"):
            reason = "turned off by PRIVAUDIT_NATIVE=0"
        else:
            try:
                kernel = load_kernel()
            except (OSError, subprocess.SubprocessError, AttributeError) as exc:
                reason = f"could not be built: {exc}"
                warnings.warn(f"privaudit: the native linear DP-SGD kernel {reason}; using the torch path "
                              "(same distribution, last float bits differ from runs with the kernel)",
                              RuntimeWarning, stacklevel=2)
        _state["kernel"], _state["reason"] = kernel, reason
        return kernel


def unavailable_reason() -> str | None:
    """Why :func:`linear_dp_kernel` returned None (None when it is available or was not asked yet)."""
    return _state.get("reason")  # type: ignore[return-value]


def _reset() -> None:
    """Forget the loaded kernel (tests: rebuild under another environment)."""
    with _lock:
        _state.pop("kernel", None)
        _state.pop("reason", None)
