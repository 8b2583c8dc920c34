#!/usr/bin/env bash
# One GPU session's benchmarks (issue 23), run from the repository root on a machine with an accelerator and JAX
# installed (no jaxprobe install needed: the repo is put on PYTHONPATH). OUT = the output folder (default
# benchmarks/results/gpu-session). Each benchmark has its own time limit so a slow one cannot take the other's time.
#   AS_SECONDS   limit for answer_speed (sample()/generate() end to end vs the limit; default 230)
#   GPU_SECONDS  limit for gpu.py (engine core vs the limit up to 2^20 chains, sample(keep_draws=False); default 210)
set -uo pipefail
OUT=${OUT:-benchmarks/results/gpu-session}
mkdir -p "$OUT/as" "$OUT/gpu"
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD" PYTHONUNBUFFERED=1
nvidia-smi -L 2>/dev/null || true
python3 -c "import jax, jaxprobe; print('jax', jax.__version__, jax.devices())"
timeout "${AS_SECONDS:-230}" python3 -m jaxprobe.bench.answer_speed --chains 2048,16384,65536 \
  --thin10-max-chains 16384 --repetitions 3 --no-memory --sections mala,samplers,keep_draws \
  --resume "$OUT/as.state" --out "$OUT/as" 2>&1 | tee "$OUT/as.log" | tail -60
echo "answer_speed exit: ${PIPESTATUS[0]}"
timeout "${GPU_SECONDS:-210}" python3 -m jaxprobe.bench.gpu --chains 1024,4096,16384,65536,262144,1048576 \
  --time-budget 110 --search-up-to 16777216 --sample-chains 262144,1048576 --out "$OUT/gpu" 2>&1 \
  | tee "$OUT/gpu.log" | tail -40
echo "gpu exit: ${PIPESTATUS[0]}"
