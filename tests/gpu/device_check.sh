#!/usr/bin/env bash
# The GPU checks of this repository in parts of at most 10 minutes each, on a machine with 2 GPUs
# (`one`: with one GPU or more),
# from the repository root, with the wheels of device_setup.sh in .whl/:
#   bash tests/gpu/device_check.sh suite     # pytest -m gpu on 2 GPUs, but the lessons and `one` (hang tests included)
#   bash tests/gpu/device_check.sh lessons   # every lesson's steps on the GPUs
#   bash tests/gpu/device_check.sh overhead  # mgtutor run vs plain torchrun, 2 ranks, 9 pairs
#   bash tests/gpu/device_check.sh one [-k …] # what one GPU can show (tests/gpu/test_one_gpu.py)
#   bash tests/gpu/device_check.sh convert   # check --fix and convert on one GPU (tests/gpu/test_convert_gpu.py)
#   bash tests/gpu/device_check.sh report    # a 1-GPU run's report and its NVML charts (needs matplotlib's wheels)
#   bash tests/gpu/device_check.sh maxbatch  # the batch finder's GPU tests, then beside its ground truth and anchors
#   MODELS=resnet50 PROVE_STEPS=200 bash tests/gpu/device_check.sh maxbatch-bench  # one model's finder, truth, anchors
#   bash tests/gpu/device_check.sh compile   # --compile auto's GPU tests, then the default against the plain loops
#   [SHAPES=resnet18:224:64,…] bash tests/gpu/device_check.sh compile-rule  # the trainer, --compile off vs default, per shape
# Output goes to $OUT (default /tmp/out) as it comes, so a part stopped by its time limit keeps
# what it did. BUDGET_S (default 570) stops a part after that many seconds.
set -u
source tests/gpu/device_setup.sh >/dev/null 2>&1 || { echo "device_setup.sh failed"; exit 1; }
export MGTUTOR_PYSPY=/tmp/site/bin/py-spy
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
budget=${BUDGET_S:-570}
pytest_gpu() { timeout "${LIMIT:-$budget}" python3 -m pytest -n 0 -m gpu -q -s -rA --durations=0 -p no:cacheprovider "$@"; }
case "${1:-}" in
  suite) pytest_gpu tests/gpu --ignore=tests/gpu/test_lessons_gpu.py --ignore=tests/gpu/test_one_gpu.py 2>&1 | tee "$OUT/gpu_suite.txt" ;;
  lessons) pytest_gpu tests/gpu/test_lessons_gpu.py 2>&1 | tee "$OUT/gpu_lessons.txt" ;;
  overhead) timeout "$budget" python3 tests/bench/overhead.py --gpu --nproc 2 --pairs 9 --work 2000 \
              --out "$OUT/overhead_gpu2.json" 2>&1 | tee "$OUT/overhead_gpu2.txt" ;;
  one) pytest_gpu tests/gpu/test_one_gpu.py "${@:2}" 2>&1 | tee "$OUT/gpu_one.txt" ;;
  convert) pytest_gpu tests/gpu/test_convert_gpu.py 2>&1 | tee "$OUT/gpu_convert.txt" ;;
  report) pytest_gpu tests/gpu/test_report_gpu.py 2>&1 | tee "$OUT/gpu_report.txt" ;;
  maxbatch) LIMIT=150 pytest_gpu tests/gpu/test_maxbatch_gpu.py 2>&1 | tee "$OUT/gpu_maxbatch.txt"
            ACCELERATE_WARM=${ACCELERATE_WARM:-} bash tests/bench/maxbatch_bench.sh "$OUT" $((budget - 160)) \
              >"$OUT/maxbatch_bench.txt" 2>&1 ;;
  maxbatch-bench) ACCELERATE_WARM=${ACCELERATE_WARM:-} bash tests/bench/maxbatch_bench.sh "$OUT" $((budget - 20)) \
              >"$OUT/maxbatch_bench.txt" 2>&1 ;;
  compile) LIMIT=120 pytest_gpu tests/gpu/test_train_compile_gpu.py 2>&1 | tee "$OUT/gpu_compile.txt"
           (cd tests/bench && timeout $((budget - 130)) python3 compile_pairs.py --pairs 3 --steps 500 \
              --cases "${CASES:-r50-224,r18-32}" --budget-s $((budget - 200))) 2>&1 | tee "$OUT/compile_pairs.txt" ;;
  compile-rule) (cd tests/bench && timeout "$budget" python3 compile_rule.py --pairs 3 --steps 500 \
              ${SHAPES:+--shapes "$SHAPES"} --budget-s $((budget - 90)) --out "$OUT/compile_rule.json") 2>&1 \
              | tee "$OUT/compile_rule.txt" ;;
  *) echo "usage: bash tests/gpu/device_check.sh suite|lessons|overhead|one|convert|report|maxbatch|maxbatch-bench|compile|compile-rule"; exit 2 ;;
esac
