#!/usr/bin/env bash
# Prepare a bare GPU machine (its Python has torch but no textual) to run this project's GPU suite:
#   source tests/gpu/device_setup.sh     (with the wheels from device-wheels.sh in .whl/, pytest-xdist and
#   execnet among them: the suite's addopts name -n; the GPU suite runs with -n 0)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . || return 1
export PATH="$(python3 -c 'import sys,os;print(os.path.dirname(sys.executable))'):$PATH"
