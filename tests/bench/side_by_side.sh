#!/usr/bin/env bash
# Issue 19's GPU measurements in one call on 2 GPUs (about 6 minutes on 2× H200), from the repository
# root, after `source tests/gpu/device_setup.sh`; .nccl-tests-src/ (or NCCL_TESTS_SRC) holds the
# nccl-tests source. Everything lands in $OUT as three files: log.txt (all that was printed),
# results.json (the summaries) and raw.tar.gz (every raw output and the run records).
#   1. nccl-tests all_reduce_perf with and without -G 20, `mgtutor bench allreduce`, the plain loop
#   2. `mgtutor train` (default flags, 1 GPU) vs tests/bench/plain_train.py, interleaved pairs
#   3. efficiency on 2 GPUs with the default flags: ResNet-18 32×32 and ResNet-50 224×224
# BUDGET_S (default 420) skips what would start too late to finish in time.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-bench-out}
RAW=${RAW:-/tmp/side-by-side}
BUDGET_S=${BUDGET_S:-420}
PAIRS=${PAIRS:-5}
mkdir -p "$OUT" "$RAW"
export XDG_STATE_HOME="$RAW/state"  # the run records go into the archive too
exec > >(tee "$OUT/log.txt") 2>&1

left() { echo $((BUDGET_S - SECONDS)); }
part() {  # name, seconds it needs, command…
  local name=$1 need=$2; shift 2
  if [ "$(left)" -lt "$need" ]; then echo "== $name: SKIPPED ($(left) s left, needs ~$need)"; return; fi
  echo "== $name (t=${SECONDS}s): $*"
  "$@" || echo "== $name: FAILED (exit $?)"
}

date -u +"%F %T UTC"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv
python3 -c "import torch; print('torch', torch.__version__, 'nccl', '.'.join(map(str, torch.cuda.nccl.version())), 'gpus', torch.cuda.device_count())"
cat COMMIT 2>/dev/null || git log -1 --format='%H' 2>/dev/null || true  # COMMIT: written beside an exported tree
nproc

part allreduce 150 env OUT="$RAW" SIZES=8,512M,2G bash tests/bench/nccl_tests.sh run
part train-pairs 150 python3 tests/bench/train_pairs.py --pairs "$PAIRS" --steps 500 --out "$RAW/train_pairs.json"
part eff-r18-32 60 sh -c "python3 -m mgtutor.tui bench scaling --json --model resnet18 --image-size 32 \
  --batch-size 512 --steps 500 > $RAW/eff_r18_32.json"
part eff-r50-224 70 sh -c "python3 -m mgtutor.tui bench scaling --json --model resnet50 --image-size 224 \
  --batch-size 128 --steps 200 > $RAW/eff_r50_224.json"
# does capture need TORCH_NCCL_ASYNC_ERROR_HANDLING=0 (which the worker sets for graphs) on this torch?
part graphs-with-async-errors 40 sh -c "TORCH_NCCL_ASYNC_ERROR_HANDLING=3 python3 -m mgtutor.tui train \
  --model resnet18 --batch-size 256 --steps 40 > $RAW/graphs_async3.txt 2>&1; echo exit \$?; tail -4 $RAW/graphs_async3.txt"

python3 - "$RAW" "$OUT/results.json" <<'EOF'
import json, subprocess, sys
from pathlib import Path
raw, dest = Path(sys.argv[1]), Path(sys.argv[2])
def load(name):
    try:
        return json.loads((raw / name).read_text())
    except (OSError, ValueError):
        return None
table = subprocess.run([sys.executable, "tests/bench/allreduce_table.py", str(raw), "--json"], capture_output=True, text=True)
eff = {}
for name in ("eff_r18_32.json", "eff_r50_224.json"):
    report = load(name)
    if report:
        eff[name] = [(p["world_size"], p["samples_per_s"], p["efficiency"]) for p in report["points"]]
results = {"allreduce": json.loads(table.stdout) if table.returncode == 0 else table.stderr,
           "train_pairs": load("train_pairs.json"), "efficiency": eff}
dest.write_text(json.dumps(results, indent=1))
print(json.dumps(eff))
EOF
python3 tests/bench/allreduce_table.py "$RAW"
tar -czf "$OUT/raw.tar.gz" -C "$RAW" . 2>/dev/null
echo "== done in ${SECONDS}s"
