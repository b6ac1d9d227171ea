"""A torch-free rank that looks like the trainer on the wire (`python -m mgtutor.training.worker.train
--log-every 1` on CPU ranks): its start lines and one step line a step on rank 0, the trainer's own
format, and the same events (start, rendezvous, a step event per step on every rank, result).

For tests of what mgtutor does with such a run (the Monitor following its lines), not of the trainer:
the trainer itself runs for real in test_train*.py and test_monitor_live.py. Run it as a script under
the stand-in torchrun (the `standin_torchrun` fixture): `trainer_like_rank.py STEPS [SECONDS_PER_STEP]`.
"""
from __future__ import annotations

import os
import sys
import time

from mgtutor.training.runs.events.writer import EventWriter


def main(argv: list[str]) -> int:
    steps = int(argv[0]) if argv else 1_000_000
    pause = float(argv[1]) if len(argv) > 1 else 0.02
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    events = EventWriter.from_env(rank)
    events.emit("start", pid=os.getpid(), host=os.uname().nodename, local_rank=rank, world_size=world,
                backend="gloo", device="cpu", model="tinycnn", data="synthetic", strategy="ddp", batch_size=8)
    events.emit("rendezvous", waited_s=0.01, world_size=world, backend="gloo")
    if rank == 0:
        print("cuda graphs: off (auto: the ranks run on the CPU)", flush=True)
        print("compile: off (auto: the ranks run on the CPU)", flush=True)
    loss = 2.3026
    for step in range(1, steps + 1):
        time.sleep(pause)
        loss *= 0.999
        rate = 400.0 + 10 * (step % 7)
        events.emit("step", step=step, epoch=step // 64, loss=loss, samples_per_s=rate, data_wait_s=0.001,
                    compute_s=pause, mem_alloc_mib=0.0, mem_peak_mib=0.0, lr=0.1)
        if rank == 0:
            print(f"step {step:>6}/{steps}  epoch {step // 64}  loss {loss:.4f}  {rate:>10,.0f} samples/s/rank  "
                  f"data wait {step % 9 + 1:>3.0f}%  mem {0:,.0f}/{0:,.0f} MiB", flush=True)
    events.emit("result", steps=steps, samples_per_s=400.0, final_loss=loss)
    if rank == 0:
        print(f"done: {steps} steps", flush=True)
    events.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
