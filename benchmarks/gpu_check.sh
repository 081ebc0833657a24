#!/usr/bin/env bash
# The GPU checks of issue 17 in one command, on a machine with a CUDA GPU and a CUDA build of torch
# in .venv (`make setup TORCH_INDEX=https://download.pytorch.org/whl/cu126`, or your own torch):
#
#   bash benchmarks/gpu_check.sh [STEP ...]      STEP: tests kernels canary sgd wbruns many audit default scale
#                                                (default: all but `default`, which `audit` covers twice)
#
#   tests   the suite's CUDA tests (tests/train/test_devices.py — with issue 43's CUDA-graph test —, the
#           static-step tests, the device/determinism tests and the white-box recording on the device)
#   kernels the host CPU's native DP-SGD kernel builds (issue 43): the bit-identity tests of every build
#           the CPU can run (AVX-512 where it has it) and bench_many_heads.py --kernel-builds (linear-dp-1024
#           per build, % of the CPU's fp32 matmul peak; target >= 30 %), again on 1 and 4 threads where the
#           host has more than 4 cores
#   canary  bench_canary_training.py --gpu: 1000 DP-SGD linear heads, 20 epochs on 50k x 512, eager steps
#           and CUDA-graph steps side by side (targets: < 60 s, >= 100x a sequential opacus loop on the
#           same GPU; issue 43: < 2 s on an H200, from 16.1 s)
#   sgd     bench_sgd_graphs.py: one call of the default MLP's batched SGD trainer (30 epochs, 25k x 512 rows,
#           2 and 32 models), eager steps against epochs in CUDA graphs, alternating, with bit-identity;
#           SGD_ARGS adds arguments (e.g. "--repeats 1"); a last row times the mlp defender's own fit likewise
#   wbruns  bench_whitebox_runs_device.py: the white-box audit's watched opacus runs of dpsgd_eps1 (25k x 512,
#           2 epochs a run) one after the other in one process against forked workers sharing the GPU, 2 and 4 runs
#   many    bench_many_heads.py --device cuda --steps 128: models/s, useful GFLOP/s, % of the GPU's fp32
#           peak; dp rows also with eager steps, side by side
#   audit   the default audit run twice on the GPU (`dvc repro --force`, base.device: auto picks CUDA):
#           the release verdict, run-to-run identity of every stage output on the GPU, and
#           `dvc metrics diff` against the committed CPU metrics; the workspace is restored
#           afterwards (git checkout + dvc checkout), so nothing GPU-made is left to commit by mistake
#   default bench_scale.py --data params --device cuda: the default audit's `dvc repro` once, per stage (wall,
#           fits, peak RSS and GPU memory, the plan's estimate), on the warm stage server unless SCALE_WARM=0;
#           stopped after DEFAULT_TIMEOUT seconds (default 240); DEFAULT_DEVICE=cpu runs it on the machine's CPU
#           cores instead (base.device cpu), to compare the two on one machine
#   scale   bench_scale.py --gpu: the default audit's `dvc repro` on a synthetic 50k x 512 x 10 embedding CSV
#           in a scratch copy (per-stage wall, fits, peak RSS and peak GPU memory), stopped after
#           SCALE_TIMEOUT seconds (default 330, so the step ends within ~6 minutes; what finished is
#           written, the cut-off stage named); SCALE_N / SCALE_D change the size, SCALE_PROFILE=STAGE runs that
#           stage under cProfile (its top entries in the results, also when cut off); on the warm stage server
#           (`privaudit warm -- dvc repro`, as make audit) unless SCALE_WARM=0
#
# Everything goes to benchmarks/results/gpu/<device name>/, or to $RESULTS when set (the gate records that folder's hash, like
# every benchmark result). DEVICE=cpu runs the same steps on the CPU into a temporary folder, to
# check this script without a GPU: `audit` then shows no metric differences; `canary` and `many`
# run shrunk dry runs (static steps without graphs in place of CUDA graphs). PY and DVC name another interpreter and DVC command (default: the project's .venv),
# e.g. on a machine whose system Python already holds a CUDA torch:
#   PYTHONPATH=$PWD/src:$PWD PY=python3 DVC="python3 -m dvc" bash benchmarks/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DVC=${DVC:-.venv/bin/dvc}
DEVICE=${DEVICE:-cuda}
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests kernels canary sgd many audit scale)

if [ "$DEVICE" = cuda ]; then
  $PY -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device visible to torch ' + torch.__version__)"
  name=$($PY -c "import torch; print(torch.cuda.get_device_name().replace(' ', '_'))")
  out=${RESULTS:-benchmarks/results/gpu/$name}
else
  name=cpu-dry-run
  out=$(mktemp -d)  # a dry run leaves nothing under benchmarks/results
fi
mkdir -p "$out"
[ -d .venv/bin ] && export PATH="$PWD/.venv/bin:$PATH"
echo "gpu_check: device $DEVICE ($name), results in $out"

for step in "${steps[@]}"; do
  case "$step" in
    tests)
      $PY -m pytest -q -p no:cacheprovider -rs tests/train/test_devices.py tests/train/test_static_steps.py \
        tests/features/test_device.py tests/validation/test_determinism.py tests/whitebox/test_hooks_device.py \
        tests/unit/test_cuda_state.py \
        2>&1 | tee "$out/cuda_tests.txt"
      ;;
    kernels)
      { grep -m1 -o 'avx512f' /proc/cpuinfo || echo "no avx512f on this CPU"
        $PY -m pytest -q -p no:cacheprovider -rs tests/train/test_native_kernel.py -k "simd or isa" 2>&1
        $PY benchmarks/bench_many_heads.py --device cpu --rows none --kernel-builds --repeats 3 2>&1
        # thread scaling of the same row (is the kernel bound by threads or by memory?), where the host has > 4 cores
        if [ "$(nproc)" -gt 4 ]; then
          for t in 1 4; do $PY benchmarks/bench_many_heads.py --device cpu --rows none --kernel-builds --repeats 2 --threads $t 2>&1; done
        fi
      } | tee "$out/cpu_kernel_builds.txt"
      ;;
    canary)
      if [ "$DEVICE" = cuda ]; then
        # CANARY_ARGS: e.g. "--no-sequential --no-triton" where the lease is short
        $PY benchmarks/bench_canary_training.py --gpu --out "$out/canary_training.txt" \
          --kernel-profile "$out/canary_kernel_profile.txt" ${CANARY_ARGS:-}
      else
        $PY benchmarks/bench_canary_training.py --dry-run --out "$out/canary_training.txt"
      fi
      ;;
    sgd)
      if [ "$DEVICE" = cuda ]; then
        $PY benchmarks/bench_sgd_graphs.py --out "$out/sgd_graphs.txt" ${SGD_ARGS:-}  # e.g. "--repeats 1" in a short lease
      else
        $PY benchmarks/bench_sgd_graphs.py --dry-run --out "$out/sgd_graphs.txt"
      fi
      ;;
    wbruns)
      if [ "$DEVICE" = cuda ]; then
        $PY benchmarks/bench_whitebox_runs_device.py --out "$out/whitebox_runs_device.txt"
      else
        $PY benchmarks/bench_whitebox_runs_device.py --dry-run --out "$out/whitebox_runs_device.txt"
      fi
      ;;
    many)
      if [ "$DEVICE" = cuda ]; then
        $PY benchmarks/bench_many_heads.py --device cuda --steps 128 --out "$out/many_heads.txt"
      else
        $PY benchmarks/bench_many_heads.py --device cpu --rows 'linear-dp-16' --steps 4 --repeats 1 \
          --compare-eager --out "$out/many_heads.txt"
      fi
      ;;
    audit)
      if ! git diff --quiet HEAD -- dvc.lock metrics params.yaml; then
        echo "gpu_check: dvc.lock, metrics/ or params.yaml differ from HEAD; commit or stash first" >&2
        exit 1
      fi
      trap 'git checkout -q HEAD -- dvc.lock metrics && { $DVC checkout -q || echo "gpu_check: dvc checkout failed; run it to restore data/" >&2; }' EXIT
      $DVC repro --force 2>&1 | tail -3
      first=$(mktemp -d)
      cp -r dvc.lock metrics "$first/"
      $DVC repro --force 2>&1 | tail -3
      {
        echo "device $DEVICE ($name): the default audit run twice with dvc repro --force"
        $PY - "$first/dvc.lock" <<'PYEOF'
import json, sys, yaml
gate = json.load(open("metrics/gate.json"))
print("release gate (metrics/gate.json):", "PASS" if gate["passed"] else "FAIL",
      {name: d["passed"] for name, d in gate["defenders"].items()})
def outs(path):
    stages = yaml.safe_load(open(path))["stages"]
    return {o["path"]: o.get("md5") for st in stages.values() for o in st.get("outs", [])}
a, b = outs(sys.argv[1]), outs("dvc.lock")
diff = sorted(p for p in a if a[p] != b.get(p))
print(f"run to run on this device: {len(a) - len(diff)} of {len(a)} stage outputs bit-identical (dvc.lock md5)"
      + (f"; differ: {', '.join(diff)}" if diff else ""))
PYEOF
        echo "vs the committed CPU metrics (dvc metrics diff HEAD at 6 digits; a metric not listed is equal):"
        $DVC metrics diff --precision 6 HEAD
        echo "dvc.lock and metrics files that differ from HEAD:"
        git diff --stat HEAD -- dvc.lock metrics
      } 2>&1 | tee "$out/audit_vs_cpu.txt"
      ;;
    default)
      warm=$([ "${SCALE_WARM:-1}" = 1 ] && echo --warm --tag warm)
      DVC="$DVC" $PY benchmarks/bench_scale.py --data params --device "${DEFAULT_DEVICE:-$DEVICE}" \
        --timeout "${DEFAULT_TIMEOUT:-240}" --out-dir "$out" $warm
      ;;
    scale)
      # on the CPU dry run: a small size, so the step is checked without a GPU
      # on the warm stage server, as make audit runs it (SCALE_WARM=0: cold, as a plain dvc repro)
      warm=$([ "${SCALE_WARM:-1}" = 1 ] && echo --warm --tag warm)
      if [ "$DEVICE" = cuda ]; then
        DVC="$DVC" $PY benchmarks/bench_scale.py --device cuda --n "${SCALE_N:-50000}" --d "${SCALE_D:-512}" \
          --timeout "${SCALE_TIMEOUT:-330}" --profile "${SCALE_PROFILE:-}" --out-dir "$out" $warm
      else
        DVC="$DVC" $PY benchmarks/bench_scale.py --device cpu --n "${SCALE_N:-600}" --d "${SCALE_D:-16}" \
          --timeout "${SCALE_TIMEOUT:-60}" --out-dir "$out" $warm
      fi
      ;;
    *)
      echo "gpu_check: unknown step $step (tests kernels canary sgd wbruns many audit default scale)" >&2
      exit 2
      ;;
  esac
done
