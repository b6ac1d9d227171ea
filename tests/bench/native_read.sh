#!/usr/bin/env bash
# How long py-spy takes to read a process that waits on the GPU (torch.cuda.synchronize behind a
# long kernel), Python-only (--nonblocking) and with native frames (--native): the two reads
# mgtutor's stack capture makes. On the GPU machine, after `source tests/gpu/device_setup.sh`;
# PYSPY: the py-spy to use (default: the one on PATH). Writes the native dump to $OUT if set.
set -u
SPY=${PYSPY:-py-spy}
python3 - <<'PY' &
import torch
torch.cuda.init(); torch.ones(1, device="cuda")
print("waiting on the GPU", flush=True)
while True:
    torch.cuda._sleep(10**11)  # a kernel that spins for tens of seconds
    torch.cuda.synchronize()
PY
pid=$!
sleep 20
TIMEFORMAT="%R s"
for i in 1 2 3; do
  echo -n "nonblocking: "; { time "$SPY" dump --pid $pid --nonblocking --json --locals >/dev/null; } 2>&1
  echo -n "native:      "; { time "$SPY" dump --pid $pid --native --json --locals > "${OUT:-/tmp}/native_dump.json"; } 2>&1
done
python3 -c "
import json,sys; t=json.load(open('${OUT:-/tmp}/native_dump.json'))
main=[th for th in t if th.get('thread_name')=='MainThread'] or t[:1]
for f in main[0]['frames'][:14]: print('   ', '[native]' if f.get('module') else '        ', f['name'], f.get('short_filename'), f.get('line'))"
kill $pid; wait $pid 2>/dev/null
