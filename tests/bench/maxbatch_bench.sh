#!/usr/bin/env bash
# The batch finder beside its anchors on one GPU, for docs/benchmarks.md:
#   [MODELS="resnet50 vit_b_16 convnext_tiny"] [PROVE_STEPS=20] bash tests/bench/maxbatch_bench.sh OUT_DIR [DEADLINE_S]
# For each model: `mgtutor bench maxbatch --json` (the finder, its proof), then a bisection ground
# truth, accelerate's find_executable_batch_size and Lightning's Tuner.scale_batch_size, each in its
# own process. Nothing new starts once DEADLINE_S seconds (default 420) have passed: what did not
# run is written as {"skipped": …} so the table says so.
set -u
out=${1:?OUT_DIR}; deadline=${2:-420}; start=$SECONDS
results="$out/maxbatch_results.jsonl"
left() { echo $((deadline - (SECONDS - start))); }
skip() { echo "{\"skipped\": \"$1\", \"model\": \"$2\", \"why\": \"device time\"}" >>"$results"; }
finder() {
  local model=$1
  local began=$SECONDS
  python3 -m mgtutor.tui bench maxbatch --model "$model" --image-size 224 --prove-steps "${PROVE_STEPS:-20}" \
    --json >"/tmp/finder_$model.json" 2>>"$out/log.txt" || echo "finder $model failed" >>"$out/log.txt"
  cat "/tmp/finder_$model.json" >>"$out/finder.jsonl"
  python3 - "/tmp/finder_$model.json" "$model" $((SECONDS - began)) >>"$results" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except ValueError:
    d = {"ok": False}
keep = {k: d.get(k) for k in ("measured_max", "chosen_batch", "predicted", "per_sample_bytes", "fixed_bytes",
                               "budget_bytes", "seconds", "proved", "proved_steps", "ok")}
print(json.dumps({"method": "finder", "model": sys.argv[2], "wall_s": int(sys.argv[3]), "trials": len(d.get("trials", [])), **keep}))
PY
}
anchor() {
  local method=$1 model=$2; shift 2
  timeout "$(left)" python3 tests/bench/maxbatch_anchors.py --method "$method" --model "$model" "$@" 2>>"$out/log.txt" \
    | grep '^ANCHOR ' | sed 's/^ANCHOR //' >>"$results" || echo "$method $model failed" >>"$out/log.txt"
}
# the finder and its ground truth first (what the numbers are judged by), then the two anchors;
# MODELS picks the models (all three, with their 200-step proofs and both anchors, need about 18 minutes:
# one model a call fits in one 10-minute call)
models=${MODELS:-resnet50 vit_b_16 convnext_tiny}
plan=""
for m in $models; do plan="$plan finder:$m truth:$m"; done
for m in $models; do plan="$plan accelerate:$m"; done
for m in $models; do plan="$plan lightning:$m"; done
for item in $plan; do
  step=${item%%:*}; model=${item#*:}
  need=40; [ "$step" = lightning ] && need=90
  if [ "$(left)" -lt "$need" ]; then skip "$step" "$model"; continue; fi
  echo "== $step $model ($(left) s left)" | tee -a "$out/log.txt"
  case $step in
    finder) finder "$model" ;;
    lightning) anchor lightning "$model" --init-val 512 --max-trials "${LIGHTNING_TRIALS:-12}" ;;
    accelerate) anchor accelerate "$model" ${ACCELERATE_WARM:+--warm} ;;
    *) anchor "$step" "$model" ;;
  esac
done
cat "$results"
