#!/bin/bash
# GPU figures of certification and ARC training (the README's H200 figures), JSON lines in OUT.
#
#   bash benchmarks/gpu_figures.sh [OUT]      (default: gpu_figures/)
#
# Compiling the DP's programs is what costs on a GPU (minutes per benchmark), so phase A runs
# every benchmark at once into JAX's persistent compilation cache (one compilation per CPU core),
# and phase B runs them one at a time, loading their programs from that cache, so that each
# timed pass has the GPU to itself. BUDGET and WARM (seconds) bound the whole and phase A.
set -u
OUT=${1:-gpu_figures}; mkdir -p "$OUT/warm"
T0=$(date +%s); BUDGET=${BUDGET:-470}; WARM=${WARM:-280}
el() { echo $(( $(date +%s) - T0 )); }
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=2
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/arc_jax_gpu_cache}
export JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=-1
python3 -c 'import jax; print("jax", jax.__version__, jax.devices())' | tee "$OUT/versions.txt"
python3 -c 'from arc_jax.data import prepare_lstm_data as p; p("sst2"); p("sst2", synonyms="ppdb", max_candidates=None)' > "$OUT/warm/prepare.txt" 2>&1 || tail -n 5 "$OUT/warm/prepare.txt"
C="benchmarks/certify_throughput.py --skip-imdb"
T="benchmarks/train_throughput.py"
SPACES=('[(Sub,2),(Del,2)]' '[(Sub,2),(Ins,2)]' '[(Del,2),(Ins,2)]')
echo "[$(el)s] phase A: compile concurrently"
pids=""
for i in 0 1 2; do
  python3 $C --spaces "${SPACES[$i]}" > "$OUT/warm/certify_$i.jsonl" 2>&1 & pids="$pids $!"
done
for model in lstm bilstm; do
  python3 $T --model $model > "$OUT/warm/train_$model.jsonl" 2>&1 & pids="$pids $!"
done
while [ $(el) -lt $WARM ]; do
  alive=0; for p in $pids; do kill -0 $p 2>/dev/null && alive=$((alive + 1)); done
  [ $alive -eq 0 ] && break; sleep 5
done
for p in $pids; do kill -9 $p 2>/dev/null; done
stage() {  # NAME CAP ARGS...: one benchmark alone, at most CAP seconds and what the budget leaves
  local name=$1 cap=$2; shift 2
  local left=$(( BUDGET - $(el) )); [ $left -lt $cap ] && cap=$left
  [ $cap -lt 15 ] && { echo "skipped $name: no time left"; return; }
  echo "[$(el)s] $name (at most ${cap}s)"
  timeout -s KILL $cap python3 "$@" > "$OUT/$name.jsonl" 2> "$OUT/$name.err"; cat "$OUT/$name.jsonl"
}
echo "[$(el)s] phase B: one at a time"
stage certify 120 $C
stage train_lstm 60 $T --model lstm
stage train_bilstm 60 $T --model bilstm
echo "[$(el)s] done"
