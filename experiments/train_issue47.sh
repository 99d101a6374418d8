#!/usr/bin/env bash
# Train amendment 7's held-out seeds (issue #47) one at a time on one thread, resuming an
# interrupted run, into runs/issue47/models/RECIPE-sSEED; then ship each with
#   .venv/bin/python experiments/ship_checkpoints.py runs/issue47/models/RECIPE-sSEED
# (into src/phasescope/assets/reproduce, where `phasescope reproduce` finds them). Measured here,
# with other work on the second core: 6.5-12.5 min per tiny model, 25-33 min per transformers V4 tiny.
set -u
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
R=runs/issue47/models
mkdir -p "$R"
for run in tiny-v4.1:12 tiny-v4.1:13 tiny-s4:12 tiny-s4:13 tiny-s8:12 tiny-s8:13 hf-deepseek-v4-tiny:12 hf-deepseek-v4-tiny:13; do
  recipe=${run%:*}; seed=${run#*:}; out=$R/$recipe-s$seed
  if [[ -f $out/model.safetensors || -f $out/hf/model.safetensors ]]; then echo "done already $out"; continue; fi
  resume=(); [[ -f $out/checkpoints/LATEST ]] && resume=(--resume)
  began=$SECONDS
  echo "$(date +%T) train $recipe $seed" >> "$R/times.txt"
  .venv/bin/phasescope train "$recipe" --set threads=1 --set "seed=$seed" --out "$out" --no-progress "${resume[@]}" >> "$R/$recipe-s$seed.log" 2>&1
  echo "$(date +%T) finished $recipe seed $seed rc $? in $((SECONDS - began)) s" >> "$R/times.txt"
done
echo "$(date +%T) all trained" >> "$R/times.txt"
