#!/usr/bin/env bash
# Train amendment 8's 2 x 2 (issue #60: step {2, 4} x pooler {scalar, channel}, seeds 16-18) one
# model at a time on one thread, resuming an interrupted run, into runs/issue60/models/RECIPE-sSEED.
# Two copies split the list (WORKER=0 and WORKER=1, each on one core); then sweep and judge with
#   .venv/bin/python -m phasescope.reproduce.amendment8 --models runs/issue60/models --out runs/issue60
# Extra arguments (RECIPE:SEED ...) replace the list, e.g. a spare seed 19 for a cell short of seeds, or
# amendment 9's: tiny-full-matched:16 tiny-full-matched:17 tiny-full-matched:18 tiny-v4.1:16 tiny-v4.1:17 tiny-v4.1:18
# amendment 10's: hf-deepseek-v4-tiny-topk16:0 hf-deepseek-v4-tiny-topk16:1 hf-deepseek-v4-tiny-topk16:2
set -u
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
R=runs/issue60/models
mkdir -p "$R"
runs=("$@")
if [[ ${#runs[@]} -eq 0 ]]; then
  for seed in 16 17 18; do for recipe in tiny-s2 tiny-s2-channel tiny-s4 tiny-s4-channel; do runs+=("$recipe:$seed"); done; done
fi
worker=${WORKER:-0} workers=${WORKERS:-1}
for i in "${!runs[@]}"; do
  (( i % workers == worker )) || continue
  run=${runs[$i]}; recipe=${run%:*}; seed=${run#*:}; out=$R/$recipe-s$seed
  if [[ -f $out/model.safetensors ]]; then echo "done already $out"; continue; fi
  resume=(); [[ -f $out/checkpoints/LATEST ]] && resume=(--resume)
  began=$SECONDS
  echo "$(date +%T) train $recipe $seed" >> "$R/times.txt"
  if [[ $recipe == tiny-full-matched ]]; then  # two passes, stopped at tiny-s4's accuracy (reproduce/matched.py)
    .venv/bin/python -m phasescope.reproduce.matched --seed "$seed" --out "$out" >> "$R/$recipe-s$seed.log" 2>&1
  else
    .venv/bin/phasescope train "$recipe" --set threads=1 --set "seed=$seed" --out "$out" --no-progress "${resume[@]}" >> "$R/$recipe-s$seed.log" 2>&1
  fi
  echo "$(date +%T) finished $recipe seed $seed rc $? in $((SECONDS - began)) s" >> "$R/times.txt"
done
echo "$(date +%T) worker $worker: all trained" >> "$R/times.txt"
