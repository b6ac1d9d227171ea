#!/usr/bin/env bash
# What a quiet but working GPU rank pays under `mgtutor run` (its stall detector looks at silent ranks)
# against plain torchrun, and with the detector off (--hang-after 0). On the GPU machine, from the
# repository root, with the wheels of tests/gpu/device_setup.sh in .whl/. Prints each run's steps/s
# (tests/bench/overhead_worker.py, timed with CUDA events inside the rank) and how many stack
# captures mgtutor saved. PAIRS (default 2) rounds of the three.
source tests/gpu/device_setup.sh >/dev/null 2>&1
export MGTUTOR_PYSPY=/tmp/site/bin/py-spy XDG_STATE_HOME=/tmp/hang-cost
W="tests/bench/overhead_worker.py --mode gpu --work 6000"
rate() { python3 -c "import json,glob; print(round(sum(json.load(open(f))['rate'] for f in glob.glob('$1/*.json')), 1))"; }
for _ in $(seq "${PAIRS:-2}"); do
  rm -rf /tmp/r; python3 -m torch.distributed.run --standalone --nproc-per-node 1 $W --report-dir /tmp/r >/dev/null 2>&1
  echo "plain torchrun    $(rate /tmp/r) steps/s"
  rm -rf /tmp/r; python3 -m mgtutor.tui run --nproc 1 -- $W --report-dir /tmp/r >/dev/null 2>&1
  echo "mgtutor run       $(rate /tmp/r) steps/s, captures saved: $(ls -d "$XDG_STATE_HOME"/mgtutor/runs/*/stacks/*/ 2>/dev/null | grep -vc /live/)"
  rm -rf "$XDG_STATE_HOME" /tmp/r; python3 -m mgtutor.tui run --nproc 1 --hang-after 0 -- $W --report-dir /tmp/r >/dev/null 2>&1
  echo "  --hang-after 0  $(rate /tmp/r) steps/s"
done
