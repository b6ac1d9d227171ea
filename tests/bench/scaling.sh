#!/usr/bin/env bash
# Training throughput and scaling on the GPU machine (2× H200): the numbers for docs/benchmarks.md.
# Run from the repository root after `source tests/gpu/device_setup.sh`. Writes bench-out/*.json.
# In parts, each well under 10 minutes:  bash tests/bench/scaling.sh core|graphs|small|plain|seed
# Each `mgtutor bench scaling` = 1 GPU without DDP (the baseline), then DDP on 2 GPUs.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-bench-out}; mkdir -p "$OUT"
M="python3 -m mgtutor.tui"
bench() {  # name, then bench-scaling options
  local name=$1; shift
  echo "== $name: $*"; $M bench scaling --json "$@" > "$OUT/$name.json" 2> "$OUT/$name.err" || tail -5 "$OUT/$name.err"
  python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print([(p['world_size'], p['samples_per_s'], p['efficiency']) for p in r['points']])" "$OUT/$name.json"
}
PART=${1:-core}
if [ "$PART" = core ]; then
# 1. the four cases of the table, eager (bf16, channels_last, static_graph, bucket view, fused SGD;
#    graphs off: without the flag, --cuda-graphs auto would turn them on)
bench r18-32      --model resnet18 --image-size 32  --batch-size 512 --steps 200 --cuda-graphs off
bench r50-32      --model resnet50 --image-size 32  --batch-size 256 --steps 200 --cuda-graphs off
bench r18-224     --model resnet18 --image-size 224 --batch-size 256 --steps 100 --cuda-graphs off
bench r50-224     --model resnet50 --image-size 224 --batch-size 128 --steps 100 --cuda-graphs off
fi
if [ "$PART" = graphs ]; then
# 2. the same four cases with the whole step in one CUDA graph (the fix for the launch-bound 32×32 cases)
bench g-r18-32    --model resnet18 --image-size 32  --batch-size 512 --steps 300 --cuda-graphs
bench g-r50-32    --model resnet50 --image-size 32  --batch-size 256 --steps 200 --cuda-graphs
bench g-r18-224   --model resnet18 --image-size 224 --batch-size 256 --steps 100 --cuda-graphs
bench g-r50-224   --model resnet50 --image-size 224 --batch-size 128 --steps 200 --cuda-graphs
fi
if [ "$PART" = small ]; then
# 3. the launch-bound 32×32 case: other things that might help (compile, larger steps)
bench r18-32-compile  --model resnet18 --image-size 32 --batch-size 512 --steps 200 --compile default
bench r18-32-ro       --model resnet18 --image-size 32 --batch-size 512 --steps 200 --compile reduce-overhead
bench r18-32-b1024-graphs --model resnet18 --image-size 32 --batch-size 1024 --steps 200 --cuda-graphs
# DDP without its cheap options (the "default DDP" column)
bench r18-32-plainddp --model resnet18 --image-size 32 --batch-size 512 --steps 200 --static-graph off --bucket-view off
fi
if [ "$PART" = plain ]; then
# 4. the plain reference scripts (no mgtutor code), same machine, same settings
for c in "resnet18 32 512" "resnet50 32 256" "resnet18 224 256" "resnet50 224 128"; do
  set -- $c
  python3 tests/bench/plain_train.py --model $1 --image-size $2 --batch-size $3 | tee -a "$OUT/plain.jsonl"
  torchrun --nproc-per-node 2 tests/bench/plain_train.py --model $1 --image-size $2 --batch-size $3 | tee -a "$OUT/plain.jsonl"
done
fi
if [ "$PART" = seed ]; then
# 5. the seed article's recipe through the real data path (uint8 CIFAR-format files → PIL transforms,
#    4 workers, batch 128, fp32) vs the synthetic + bf16 path, on 1 and 2 GPUs
python3 tests/bench/make_fake_cifar.py /tmp/fake-cifar
bench seed-recipe  --model resnet18 --data cifar10 --data-dir /tmp/fake-cifar --workers 4 --batch-size 128 \
                   --amp off --channels-last off --cuda-graphs off --steps 200
bench seed-fast    --model resnet18 --batch-size 512 --steps 200 --cuda-graphs
fi
