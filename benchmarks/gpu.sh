#!/usr/bin/env bash
# The GPU figures in one go. PART `ppo` (the default, under 5 minutes): the throughput table
# at GPU-sized batches, a population against one member, CPU-tuned settings checked on the
# GPU path, and one preset's learning run. PART `value` (under 7 minutes): PQN, DQN and SAC
# against their references, as on the CPU (docs/benchmarks.md). Every figure goes to one
# file (first argument, default benchmarks/gpu-results.txt), each under the command that
# produced it.
#
#   bash benchmarks/gpu.sh [OUT_FILE] [ppo|value]
#
# Needs a Python whose jax sees a GPU (`pip install ".[test]" "jax[cuda12]"` where the
# network allows; PYTHON=path/to/python picks it) and runs from the repository root. Each step has its own time limit, so
# a slow one costs its limit and the script goes on.
set -u
py=${PYTHON:-python3}  # the interpreter whose jax sees the GPU
out=${1:-benchmarks/gpu-results.txt}
part=${2:-ppo}
case $part in ppo | value) ;; *) echo "gpu.sh: PART is ppo or value, got '$part'" >&2; exit 2 ;; esac
mkdir -p "$(dirname "$out")"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
: >"$out"

step() {  # step SECONDS TITLE COMMAND...: run COMMAND with a limit, its output appended under TITLE
    local limit=$1 title=$2
    shift 2
    printf '\n## %s\n$ %s\n' "$title" "$*" | tee -a "$out"
    local start=$SECONDS
    timeout "$limit" "$@" 2>&1 | tee -a "$out"
    local code=${PIPESTATUS[0]}
    printf '(exit %s, %s s)\n' "$code" $((SECONDS - start)) | tee -a "$out"
}

step 20 "machine" bash -c 'nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; nproc'
step 20 "jax" "$py" -c "import jax, jaxlib; print(jax.__version__, jaxlib.__version__, jax.devices())"
if ! "$py" -c 'import jax, sys; sys.exit(jax.devices()[0].platform != "gpu")'; then
    echo "no GPU visible to jax: nothing to measure" | tee -a "$out"
    exit 2
fi

if [ "$part" = value ]; then
    # Session against the reference (A-B-A processes), at the batch sizes the issues name.
    step 200 "PQN against purejaxql's" "$py" benchmarks/pqn_throughput.py --envs 4 64 1024 --env-steps 1e5 \
        --repeats 1 --warmup 1 --only table
    step 200 "DQN and SAC against PureJaxRL's and rejax's" "$py" benchmarks/offpolicy_throughput.py --only table \
        --repeats 1 --warmup 1
    echo "figures in $out"
    exit 0
fi

# Session against the reference (A-B-A processes per env count), batches a GPU fills.
step 95 "throughput table" "$py" benchmarks/throughput.py --table --envs 256 4096 16384 --repeats 1 --env-steps 4e6

# What the CPU defaults do on the GPU path: the automatic worker pool only sizes XLA's CPU
# client, and one device is the default only on a CPU; the same small run on each backend.
step 20 "4 envs on the GPU" "$py" benchmarks/throughput.py --envs 4 --repeats 1 --env-steps 2e5
step 20 "4 envs on the CPU" env JAX_PLATFORMS=cpu "$py" benchmarks/throughput.py --envs 4 --repeats 1 --env-steps 2e5

step 40 "population" "$py" benchmarks/population.py --pairs 1024:1:16 --updates 10 --repeats 3

# One preset's learning run, as a user starts it; its last lines give the return and SPS.
step 85 "Breakout-MinAtar preset" "$py" -m rltui launch --no-ui --no-compile-cache --set env=Breakout-MinAtar \
    --run-dir "$(mktemp -d)/breakout"

echo "figures in $out"
