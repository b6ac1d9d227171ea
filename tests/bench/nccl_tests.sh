#!/usr/bin/env bash
# NVIDIA nccl-tests beside `mgtutor bench allreduce` and a plain all_reduce loop, in one go on one machine.
#
#   bash tests/bench/nccl_tests.sh build     # build all_reduce_perf only
#   bash tests/bench/nccl_tests.sh run       # build, then the four measurements; outputs under $OUT
#
# nccl-tests is built from a source snapshot in .nccl-tests-src/ (git-ignored, never committed: export
# it there with `git archive` from a clone of github.com/NVIDIA/nccl-tests), against the NCCL that torch
# itself loads (the nvidia-nccl wheel's headers and libnccl.so.2), so both sides run the same NCCL.
# Needs nvcc (CUDA_HOME, default /usr/local/cuda) and `mgtutor` importable by $PYTHON.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PART=${1:-run}
PY=${PYTHON:-python3}
OUT=${OUT:-bench-out}
SRC=$(cd "${NCCL_TESTS_SRC:-.nccl-tests-src}" 2>/dev/null && pwd) || { echo "no nccl-tests source at ${NCCL_TESTS_SRC:-.nccl-tests-src}"; exit 1; }
WORK=${NCCL_TESTS_WORK:-/tmp/nccl-tests}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
GENCODE=${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90}  # H100/H200; set NVCC_GENCODE for other GPUs
SIZES=${SIZES:-8,512M,2G}
mkdir -p "$OUT" "$WORK"

build() {
  local nccl
  nccl=$("$PY" -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])") || return 1
  # a scratch NCCL_HOME: the wheel's whole include/ (nccl.h needs its nccl_device/ folder) and the
  # unversioned library name the linker looks for
  rm -rf "$WORK/home" && mkdir -p "$WORK/home/lib"
  cp -r "$nccl/include" "$WORK/home/include"
  ln -sf "$nccl/lib/libnccl.so.2" "$WORK/home/lib/libnccl.so"
  ln -sf "$nccl/lib/libnccl.so.2" "$WORK/home/lib/libnccl.so.2"
  echo "== building all_reduce_perf against $(grep -m1 -o 'NCCL_VERSION_CODE [0-9]*' "$WORK/home/include/nccl.h" || echo "$nccl")"
  make -s -C "$SRC/src" -j"$(nproc)" MPI=0 CUDA_HOME="$CUDA_HOME" NCCL_HOME="$WORK/home" \
       BUILDDIR="$WORK/build" NVCC_GENCODE="$GENCODE" "$WORK/build/all_reduce_perf" > "$OUT/nccl_tests_build.log" 2>&1 \
    || { tail -20 "$OUT/nccl_tests_build.log"; return 1; }
  ls -la "$WORK/build/all_reduce_perf"
}

nccl_test() {  # name, extra all_reduce_perf options
  local name=$1; shift
  echo "== nccl-tests all_reduce_perf -b 8 -e 4G -f 2 -g 2 $*"
  LD_LIBRARY_PATH="$WORK/home/lib:${LD_LIBRARY_PATH:-}" "$WORK/build/all_reduce_perf" -b 8 -e 4G -f 2 -g 2 "$@" \
    > "$OUT/$name.txt" 2>&1 || { tail -20 "$OUT/$name.txt"; return 1; }
  grep -E '^ +(8|536870912|2147483648) ' "$OUT/$name.txt"
}

run() {
  build || return 1
  nccl_test nccl_tests
  nccl_test nccl_tests_G20 -G 20
  echo "== mgtutor bench allreduce -b 8 -e 4G -f 2 --json"
  "$PY" -m mgtutor.tui bench allreduce -b 8 -e 4G -f 2 --json > "$OUT/mgtutor_bench.json" 2> "$OUT/mgtutor_bench.err" \
    || tail -20 "$OUT/mgtutor_bench.err"
  echo "== plain all_reduce loop --sizes $SIZES"
  "$PY" -m torch.distributed.run --nproc-per-node 2 tests/bench/plain_allreduce_loop.py --sizes "$SIZES" \
    > "$OUT/plain_loop.txt" 2>&1 || tail -20 "$OUT/plain_loop.txt"
  "$PY" tests/bench/allreduce_table.py "$OUT"
}

case "$PART" in
  build) build ;;
  run) run ;;
  *) echo "usage: $0 build|run"; exit 2 ;;
esac
