"""The report's charts: matplotlib draws each one as inline SVG.

Why matplotlib and SVG: the file must open offline and stay small, so a chart is static vector
markup inside the HTML (no script, no font or library fetched; text stays text: svg.fonttype
"none"), ~20-40 KB each. matplotlib is the plotting library the PyTorch world already has, and its
object API (`Figure`, no pyplot) draws without a display or global state, safe in a thread.
Each data line carries an id `series-…`, so a test (or a reader's tool) can tell a drawn line from
the axes. A chart with no data is not drawn: the report says why instead.
"""
from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from mgtutor.training.runs.events.types import Event, StepEvent
from mgtutor.training.runs.follow.samples import SampleRow

MAX_POINTS = 400  # per line: the SVG stays ~20-40 KB a chart whatever the run's length
# What a point may be: a record may hold 1e308 (a forged sample, a diverged loss), and matplotlib cannot
# lay out ticks over a range that overflows. A meter or a loss beyond 1e100 is no number to draw.
MOST_SECONDS, MOST_VALUE = 1e10, 1e100
Series = tuple[str, list[float], list[float]]  # label, x (seconds since the start), y


@dataclass
class Chart:
    key: str
    title: str
    unit: str
    series: list[Series] = field(default_factory=list)
    svg: str = ""

    @property
    def empty(self) -> bool:
        return not any(ys for _label, _xs, ys in self.series)


def _num(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def step_charts(events: Sequence[Event], started: float, gpu: bool = True) -> list[Chart]:
    """Per rank, from the step events of the trainer or of the ranks' hook in a user's script (`origin:
    "hook"`, the same fields): throughput, loss, step time, data wait, GPU memory (on CPU ranks both
    report the process's own peak memory there). The step time is the event's `step_s` where it has one
    (the hook's), else compute + data wait (the trainer's)."""
    memory = "GPU memory allocated per rank" if gpu else "Memory allocated per rank (CPU ranks)"
    fields: list[tuple[str, str, str, Callable[[StepEvent], float | None]]] = [
        ("throughput", "Throughput per rank", "samples/s", lambda e: _num(e.samples_per_s)),
        ("loss", "Loss per rank", "loss", lambda e: _num(e.loss)),
        ("step_time", "Step time per rank", "s", _step_time),
        ("data_wait", "Data wait per rank", "s", lambda e: _num(e.data_wait_s)),
        ("gpu_memory", memory, "MiB", lambda e: _num(e.mem_alloc_mib) or _num(e.mem_peak_mib)),
    ]
    steps = [e for e in events if isinstance(e, StepEvent)]
    charts = []
    for key, title, unit, get in fields:
        chart = Chart(key, title, unit)
        for rank in sorted({e.rank for e in steps}):
            points = [(e.t - started, y) for e in steps if e.rank == rank and (y := get(e)) is not None]
            if points:
                chart.series.append((f"rank {rank}", [p[0] for p in points], [p[1] for p in points]))
        charts.append(chart)
    return charts


def _step_time(event: StepEvent) -> float | None:
    return _num(event.step_time())


def _lines(points: dict[int, tuple[list[float], list[float]]], label: Callable[[int], str]) -> list[Series]:
    return [(label(key), xs, ys) for key, (xs, ys) in sorted(points.items()) if xs]


def gpu_charts(samples: Sequence[SampleRow], started: float) -> list[Chart]:
    """Per GPU, from the recorded NVML samples: utilisation, memory, power, temperature."""
    fields = [("gpu_util", "GPU utilisation", "%", "util_pct"), ("gpu_mem", "GPU memory used", "MiB", "mem_used_mib"),
              ("gpu_power", "GPU power", "W", "power_w"), ("gpu_temp", "GPU temperature", "°C", "temp_c")]
    names = {g.index: g.name for row in list(samples[:1]) + list(samples[-1:]) for g in row.gpus}
    charts = []
    for key, title, unit, name in fields:
        points: dict[int, tuple[list[float], list[float]]] = {}
        for row in samples:  # one pass: a day at 1 Hz on 8 GPUs is 700,000 readings
            for g in row.gpus:
                if (y := getattr(g, name)) is not None:
                    xs, ys = points.setdefault(g.index, ([], []))
                    xs.append(row.t - started)
                    ys.append(y)
        charts.append(Chart(key, title, unit, _lines(points, lambda i: f"GPU {i} {names.get(i, '')}".strip())))
    return charts


def process_charts(samples: Sequence[SampleRow], started: float) -> list[Chart]:
    """Per rank, from the psutil samples: CPU use and resident memory (what CPU ranks have for meters)."""
    charts = []
    for key, title, unit, name in (("rank_cpu", "CPU use per rank", "%", "cpu_pct"),
                                   ("rank_rss", "Resident memory per rank", "MiB", "rss_mib")):
        points: dict[int, tuple[list[float], list[float]]] = {}
        for row in samples:
            for m in row.ranks:
                if (y := getattr(m, name)) is not None:
                    xs, ys = points.setdefault(m.rank, ([], []))
                    xs.append(row.t - started)
                    ys.append(y)
        charts.append(Chart(key, title, unit, _lines(points, lambda r: f"rank {r}")))
    host = Chart("host_cpu", "Host CPU use (all cores)", "%")
    busy = [(row.t - started, row.host_cpu_pct) for row in samples if row.host_cpu_pct is not None]
    if busy:
        host.series.append(("host", [p[0] for p in busy], [float(p[1] or 0) for p in busy]))
    return charts + [host]


def thin(xs: list[float], ys: list[float], most: int = MAX_POINTS) -> tuple[list[float], list[float]]:
    """At most `most` points: the mean of each run of neighbours (a day at 1 Hz is 86,400 samples; drawn
    whole, one line would be megabytes of SVG and no more readable)."""
    if len(xs) <= most:
        return xs, ys
    size = len(xs) / most
    out_x, out_y = [], []
    for i in range(most):
        lo, hi = int(i * size), max(int((i + 1) * size), int(i * size) + 1)
        out_x.append(sum(xs[lo:hi]) / (hi - lo))
        out_y.append(sum(ys[lo:hi]) / (hi - lo))
    return out_x, out_y


def drawable(xs: list[float], ys: list[float]) -> tuple[list[float], list[float]]:
    """The points matplotlib can lay out: finite, seconds within MOST_SECONDS, values within MOST_VALUE."""
    kept = [(x, y) for x, y in zip(xs, ys) if abs(x) <= MOST_SECONDS and abs(y) <= MOST_VALUE]
    return [x for x, _y in kept], [y for _x, y in kept]


def draw(chart: Chart) -> Chart:
    """The chart's SVG (an <svg> element, no XML prolog), or none when it has no data."""
    chart.series = [(label, *drawable(xs, ys)) for label, xs, ys in chart.series]
    if chart.empty:
        return chart
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    # text as <text>: smaller and selectable; a fixed salt: the same run gives the same file; no mathtext:
    # a GPU's or a rank's name with a `$` in it is text, not a formula to parse
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "mgtutor", "text.parse_math": False}):
        # fixed margins: matplotlib's constrained layout took two thirds of each chart's time
        fig = Figure(figsize=(5.2, 2.6), dpi=72)
        fig.subplots_adjust(left=0.15, right=0.98, top=0.88, bottom=0.2)
        ax = fig.add_subplot()
        for label, all_x, all_y in chart.series:
            xs, ys = thin(all_x, all_y)
            (line,) = ax.plot(xs, ys, label=label, linewidth=1.4, marker="o" if len(xs) < 30 else None, markersize=3)
            line.set_gid("series-" + "".join(ch if ch.isalnum() else "-" for ch in label))
        ax.set_title(chart.title, fontsize=10, loc="left")
        ax.set_xlabel("seconds since the start", fontsize=8)
        ax.set_ylabel(chart.unit, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if len(chart.series) > 1 or chart.series[0][0].startswith("GPU"):
            ax.legend(fontsize=7, loc="best")
        out = io.StringIO()
        fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    text = out.getvalue()
    chart.svg = text[text.index("<svg"):]
    return chart
