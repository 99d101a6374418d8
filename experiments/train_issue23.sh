#!/usr/bin/env bash
# Train and ship the issue #23 models one at a time on one thread (the machine's other core stays
# free), resuming an interrupted run. Each finished run is copied into
# src/phasescope/assets/reproduce/RECIPE-sSEED with its manifest (experiments/ship_checkpoints.py).
#
#   bash experiments/train_issue23.sh [RECIPE:SEED ...]   # runs under $RUNS (default runs/issue23/models)
#
# Order matters: tiny-full-v64 is shipped before tiny-s4-long starts from it (init_from=tiny-full-v64
# resolves to the shipped checkpoint of the same seed); the post-training recipes start from the
# shipped tiny-s4 and hf-deepseek-v4-tiny.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-runs/issue23/models}
PY=.venv/bin/python
export OMP_NUM_THREADS=1
mkdir -p "$RUNS"

train() {  # recipe seed
  local recipe=$1 seed=$2 out="$RUNS/$1-s$2"
  if [[ -f $out/model.safetensors || -f $out/hf/model.safetensors ]]; then
    echo "done already: $out"
  else
    local resume=()
    [[ -f $out/checkpoints/LATEST ]] && resume=(--resume)
    echo "$(date +%T) train $recipe seed $seed"
    local began=$SECONDS
    .venv/bin/phasescope train "$recipe" --set threads=1 --set "seed=$seed" --out "$out" --no-progress \
      "${resume[@]}" >>"$RUNS/$recipe-s$seed.log" 2>&1
    echo "$(date +%T) finished $recipe seed $seed in $((SECONDS - began)) s" | tee -a "$RUNS/times.txt"
  fi
  $PY experiments/ship_checkpoints.py "$out"
}

# RECIPE:SEED arguments train those runs in that order; without arguments, every run below
ALL=()
for recipe in tiny-full-v64 tiny-s4-post tiny-s2 tiny-s4-d64 tiny-s2-512 tiny-v4.1-512 hf-deepseek-v4-tiny-s2 \
  tiny-full-d64 tiny-s4-d64-init tiny-s4-long hf-deepseek-v4-tiny-post tiny-v4.1 tiny-s4-512; do
  for seed in 0 1 2; do ALL+=("$recipe:$seed"); done
done
for run in "${@:-${ALL[@]}}"; do
  train "${run%:*}" "${run#*:}"
done
echo "$(date +%T) all trained"
