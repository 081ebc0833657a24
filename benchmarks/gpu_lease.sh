#!/usr/bin/env bash
# One lent GPU machine's whole check in one command, each step under its own time limit, the results packed into
# one file (a lease is 15 minutes of device time, machine start included, and returns at most 8 files):
#
#   bash benchmarks/gpu_lease.sh STEP:SECONDS ... [scale]
#
#   STEP:SECONDS  a step of gpu_check.sh (tests kernels canary sgd wbruns many audit default) stopped after SECONDS
#   scale         last: gpu_check.sh scale (50k x 512) with the time left of LEASE_SECONDS (default 550),
#                 less 60 s for writing the CSV and the results
#
# Before the steps: the wheels in .whl/ (carried to the machine; see benchmarks/results/gpu/NVIDIA_H200/README.md)
# are installed into the machine's Python (WHEELS=0: not), and its GPU, driver, Python, torch and CPU are written to setup.txt.
# Each step's output goes to log_<step>.txt and the seconds since the start to steps.txt; everything, with
# gpu_check.sh's result files, is packed into $OUT/gpu.tgz (OUT: the folder the lease returns; default ./gpu_lease).
# Used in the fifth H200 lease as:  bash benchmarks/gpu_lease.sh tests:60 kernels:90 canary:100 default:175 scale
set -uo pipefail
cd "$(dirname "$0")/.."
for arg in "$@"; do  # every argument checked before anything runs
  if [ "$arg" != scale ] && ! [[ "$arg" =~ ^[a-z]+:[0-9]+$ ]]; then
    echo "gpu_lease: '$arg' is not STEP:SECONDS (e.g. tests:60) or scale" >&2
    exit 2
  fi
done
T0=$(date +%s)
OUT=${OUT:-$PWD/gpu_lease}
R=$(mktemp -d)
mkdir -p "$OUT"
export PY=${PY:-python3} DVC=${DVC:-"python3 -m dvc"} RESULTS=$R PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}
export DEFAULT_TIMEOUT=${DEFAULT_TIMEOUT:-140} CANARY_ARGS=${CANARY_ARGS:-"--no-sequential --no-triton"}
{
  if [ -d .whl ] && [ "${WHEELS:-1}" = 1 ]; then $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir .whl/*.whl 2>&1 | tail -3; fi
  nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1 || echo "no nvidia-smi"
  $PY -c "import sys, torch; print(sys.version.split()[0], torch.__version__)"
  nproc; lscpu 2>/dev/null | grep -m1 "Model name"
  echo "setup $(( $(date +%s) - T0 )) s"
} > "$R/setup.txt" 2>&1
for arg in "$@"; do
  if [ "$arg" = scale ]; then
    left=$(( ${LEASE_SECONDS:-550} - ($(date +%s) - T0) ))
    if [ "$left" -lt 120 ]; then echo "step scale skipped: $left s left" >> "$R/steps.txt"; continue; fi
    SCALE_TIMEOUT=$(( left - 60 )) timeout "$left" bash benchmarks/gpu_check.sh scale > "$R/log_scale.txt" 2>&1
    echo "step scale rc $? at $(( $(date +%s) - T0 )) s (given $left s)" >> "$R/steps.txt"
    continue
  fi
  step=${arg%%:*}
  limit=${arg##*:}
  timeout "$limit" bash benchmarks/gpu_check.sh "$step" > "$R/log_$step.txt" 2>&1
  echo "step $step rc $? at $(( $(date +%s) - T0 )) s" >> "$R/steps.txt"
done
tar czf "$OUT/gpu.tgz" -C "$R" .
cat "$R/setup.txt" "$R/steps.txt" 2>/dev/null
echo "gpu_lease: results packed into $OUT/gpu.tgz"
