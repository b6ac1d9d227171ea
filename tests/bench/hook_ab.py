"""What the ranks' step instrumentation costs a loop, measured inside one process: hook on, hook off, in turn.

    python tests/bench/hook_ab.py                                   # CPU: a small MLP, float32
    python tests/bench/hook_ab.py --gpu --model resnet18            # ResNet-18 32², batch 512, bf16 (issue 43)
    python tests/bench/hook_ab.py --gpu --model resnet50 --windows 20 --steps 100

Why in one process: two launches of the same rank differ by ±5-10 % on a shared GPU host (the launch-bound
loop follows the host's CPU), so a launcher-against-launcher ratio (tests/bench/overhead.py) cannot resolve
2 %. The one thing `mgtutor run` adds to every step of a user's loop is the hook (training/worker/rank_hook.py:
the optimizer step hook, the backward wrapper, the DataLoader timer); everything else it adds runs outside
the rank (a fraction of one core, measured in docs/benchmarks.md). Here the same model, data and optimizer
step in windows of --steps steps, the hook installed (`rank_hook.install`, writing its events to a scratch
file as under `mgtutor run`) or taken out (`rank_hook.uninstall`), in the order on, off, off, on, ... so a
drift of the host falls on both alike. Each window is timed on the device (CUDA events; on CPU the clock);
each on/off pair gives a ratio, and the result is their median with quartiles.
Prints a line per pair, then one JSON line; --out FILE also writes the JSON there.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import print_result, spread  # noqa: E402
from overhead_worker import RESNETS, resnet_step  # noqa: E402  (the same loop overhead.py times)


def cpu_step(batch: int = 256):
    """A small float32 MLP on CPU, fed by a DataLoader as a user's loop is: every piece the hook wraps runs."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    data = torch.utils.data.TensorDataset(torch.randn(batch * 64, 64), torch.randint(0, 10, (batch * 64,)))
    loader = torch.utils.data.DataLoader(data, batch_size=batch)
    batches = iter(())

    def step() -> None:
        nonlocal batches
        try:
            x, y = next(batches)
        except StopIteration:
            batches = iter(loader)
            x, y = next(batches)
        F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return step, batch


def window_timer(gpu: bool):
    """A function that runs `steps` steps and returns their seconds, timed on the device on a GPU."""
    import torch

    def timed(step, steps: int) -> float:
        if gpu:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(steps):
                step()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / 1000
        began = time.perf_counter()
        for _ in range(steps):
            step()
        return time.perf_counter() - began
    return timed


def hook_host_cost(scratch: Path, gpu: bool) -> dict[str, float]:
    """The hook's own host time, timed alone on this machine: what its callbacks cost one step (no log
    point), and what one log point costs (on a GPU with the loss on it: the copy to pinned memory, its event, the
    wait for the last one). On a launch-bound loop the host's time is the step's, so
    (per step + per log point ÷ steps between log points) ÷ step time bounds what the hook can take."""
    import timeit

    import torch

    from mgtutor.training.runs.events.writer import EventWriter
    from mgtutor.training.worker import rank_hook

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
    loss, batch = torch.tensor(1.0, device="cuda" if gpu else "cpu"), (torch.zeros(8, 3), torch.zeros(8))
    writer = EventWriter(scratch / "cost.jsonl", 0)
    meter = rank_hook.StepMeter(writer.emit)
    meter.last_log = float("inf")  # a step that is no log point
    stepped, backward, fetched = (rank_hook._guarded(meter, name) for name in ("stepped", "backward", "fetched"))

    def one_step() -> None:
        fetched(batch, 0.0, 0.0)
        backward(loss)
        stepped(optimizer)

    def one_log_point() -> None:
        meter.window_steps = 1
        meter.log(0.0, optimizer)

    n = 20000
    per_step = min(timeit.repeat(one_step, number=n, repeat=5)) / n
    per_log = min(timeit.repeat(one_log_point, number=200, repeat=5)) / 200
    writer.close()
    return {"per_step_us": round(per_step * 1e6, 3), "per_log_point_us": round(per_log * 1e6, 1)}


def measure(args: argparse.Namespace, scratch: Path) -> dict[str, object]:
    from mgtutor.training.runs.events.writer import EventWriter
    from mgtutor.training.worker import rank_hook

    if args.gpu:
        import torch

        torch.cuda.set_device(0)
        step, per_step = resnet_step(args.model, 0, 1, None, None)
    else:
        step, per_step = cpu_step()
    timed = window_timer(args.gpu)
    writer = EventWriter(scratch / "events.jsonl", 0)
    for _ in range(args.warmup):
        step()
    timed(step, args.steps)
    on_rates: list[float] = []
    off_rates: list[float] = []
    for pair in range(args.windows):
        order = ("on", "off") if pair % 2 == 0 else ("off", "on")
        rates = {}
        for state in order:
            meter = rank_hook.install(writer) if state == "on" else None
            try:
                rates[state] = args.steps * per_step / timed(step, args.steps)
            finally:
                if meter is not None:
                    rank_hook.uninstall(meter)
        on_rates.append(rates["on"])
        off_rates.append(rates["off"])
        print(f"pair {pair + 1:>2} ({order[0]} first): hook on {rates['on']:,.1f}/s  off {rates['off']:,.1f}/s  "
              f"on ÷ off {rates['on'] / rates['off']:.4f}", flush=True)
    writer.close()
    events = scratch / "events.jsonl"
    cost = hook_host_cost(scratch, args.gpu)
    off_step_us = 1e6 * per_step / spread(off_rates)["median"]
    # a log point falls about once a second, and never more often than every LOG_EVERY steps
    steps_per_log = max(rank_hook.LOG_EVERY, rank_hook.MIN_INTERVAL_S * 1e6 / off_step_us)
    cost["step_us"] = round(off_step_us, 1)
    cost["bound"] = round((cost["per_step_us"] + cost["per_log_point_us"] / steps_per_log) / off_step_us, 6)
    return {"host_cost": cost, "mode": "gpu" if args.gpu else "cpu", "model": args.model if args.gpu else "mlp",
            "steps_per_window": args.steps, "pairs": len(on_rates),
            "ratio": spread([on / off for on, off in zip(on_rates, off_rates)]),
            "on_rate": spread(on_rates), "off_rate": spread(off_rates),
            "step_events_written": len(events.read_text().splitlines()) if events.exists() else 0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpu", action="store_true", help="a torchvision ResNet on one GPU (default: an MLP on CPU)")
    parser.add_argument("--model", choices=tuple(RESNETS), default="resnet18", help="GPU: which ResNet")
    parser.add_argument("--windows", type=int, default=30, help="on/off pairs of windows")
    parser.add_argument("--steps", type=int, default=200, help="steps in a window")
    parser.add_argument("--warmup", type=int, default=50, help="untimed steps first")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if args.windows < 1 or args.steps < 1:
        parser.error("--windows and --steps must be at least 1")
    with tempfile.TemporaryDirectory(prefix="mgtutor-hook-ab-") as tmp:
        result = measure(args, Path(tmp))
    r = result["ratio"]
    print(f"hook on ÷ off: median {r['median']:.4f} (quartiles {r['q1']:.4f}–{r['q3']:.4f}, range {r['min']:.4f}–"
          f"{r['max']:.4f}) over {result['pairs']} pairs of {args.steps} steps; {result['step_events_written']} "
          "step events written")
    c = result["host_cost"]
    print(f"the hook's own host time: {c['per_step_us']:.2f} µs a step, {c['per_log_point_us']:.0f} µs a log point, "
          f"against {c['step_us']:.0f} µs a step here: at most {100 * c['bound']:.3f} % of a launch-bound loop")
    print_result(result, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
