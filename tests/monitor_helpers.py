"""Shared pieces of the monitor tests: a torch-free rank script that speaks the event protocol,
and an app factory (waiting is tests/helpers.py's)."""
from __future__ import annotations

# A rank that behaves like the trainer on the wire: start → rendezvous → steps → result; it prints
# a coloured line (control sequences must be neutralised) and, when told, crashes at a step.
EVENT_SCRIPT = r'''
import os, sys, time
from mgtutor.training.runs.events.writer import EventWriter
rank = int(os.environ["RANK"]); world = int(os.environ["WORLD_SIZE"])
steps = int(sys.argv[1]); crash_rank = int(sys.argv[2]) if len(sys.argv) > 2 else -1
ev = EventWriter.from_env(rank)
ev.emit("start", pid=os.getpid(), world_size=world)
print(f"\x1b[31mrank {rank} up\x1b[0m", flush=True)
time.sleep(0.3)
ev.emit("rendezvous", seconds=0.3)
for step in range(1, steps + 1):
    time.sleep(0.05)
    ev.emit("step", step=step, loss=2.0 / step, samples_per_s=100.0 * (rank + 1) + step)
    print(f"step {step} loss {2.0 / step:.3f}", flush=True)
    if rank == crash_rank and step == 3:
        ev.emit("error", message="RuntimeError: injected crash")
        print("Traceback (most recent call last):\nRuntimeError: injected crash", file=sys.stderr, flush=True)
        sys.exit(3)
ev.emit("result", steps=steps)
print(f"rank {rank} done", flush=True)
'''


def make_app():
    from mgtutor.tui.app import MgTutorApp
    return MgTutorApp()


async def attach_in_monitor(pilot, record, run=None):
    """The Monitor, opened with m, attached to `record` (and to `run` when this process launched it)."""
    from mgtutor.tui.screens.monitor import MonitorScreen

    await pilot.press("m")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, MonitorScreen)
    screen.attach(record, run)
    return screen
