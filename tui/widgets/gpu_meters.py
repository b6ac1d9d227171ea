"""GPU meters, one row per GPU, and which rank's process runs on it; CPU ranks' CPU and RSS.

The sample comes from `diagnostics.gpu.Sampler` in the monitor's thread worker (≤ 1 Hz); this
widget only draws it. NVML's process pids are matched to the ranks' pids from the run record.
"""
from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.widget import Widget

from mgtutor.training.foundation.i18n import _
from mgtutor.training.runs.nvml import said
from mgtutor.diagnostics.meters import GpuSample, GpuSnapshot, HostSnapshot
from mgtutor.tui.widgets.rank_logs import RANK_COLOURS
from mgtutor.tui.widgets.blocks import sparkline

HISTORY = 180  # samples kept per row: three minutes at 1 Hz


def bar(pct: float | None, width: int) -> str:
    if pct is None:
        return "·" * width
    filled = max(0.0, min(1.0, pct / 100.0)) * width
    full = int(filled)
    partial = " ▏▎▍▌▋▊▉"[int((filled - full) * 8)] if full < width else ""
    return ("█" * full + partial).ljust(width, "░")[:width]


def ranks_on(gpu: GpuSnapshot, pid_rank: dict[int, int]) -> list[int]:
    return sorted({pid_rank[p.pid] for p in gpu.processes if p.pid in pid_rank})


def _gib(mib: int | None) -> str:
    return "?" if mib is None else f"{mib / 1024:.1f}"


class GpuMeters(Widget):
    """Draws the latest sample; keeps a short utilisation history per GPU (or per CPU rank)."""

    DEFAULT_CSS = "GpuMeters { height: auto; }"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.history: dict[str, deque[float]] = {}
        self.rows: dict[str, str] = {}  # row key → plain text of the row (tests and scripts read it)
        self._last: tuple[GpuSample | None, HostSnapshot | None, dict[int, int], str] = (None, None, {}, "gloo")
        self._lines = -1

    def _remember(self, key: str, value: float | None) -> list[float]:
        values = self.history.setdefault(key, deque(maxlen=HISTORY))
        if value is not None:
            values.append(float(value))
        return list(values)

    def show(self, gpus: GpuSample | None, host: HostSnapshot | None, pid_rank: dict[int, int], backend: str) -> None:
        if gpus is not None:
            for gpu in gpus.gpus:
                self._remember(f"gpu{gpu.index}", gpu.utilization_pct)
        if host is not None:
            for pid, rank in pid_rank.items():
                stats = host.processes.get(pid)
                self._remember(f"rank{rank}", stats.cpu_percent if stats else None)
        self._last = (gpus, host, dict(pid_rank), backend)
        lines = self.draw(self.size.width or 80).plain.count("\n")  # fills `rows` now, for readers
        self.refresh(layout=lines != self._lines)  # a layout pass only when the height changes
        self._lines = lines

    def render(self) -> Text:
        return self.draw(self.size.width)

    def draw(self, width: int) -> Text:
        gpus, host, pid_rank, backend = self._last
        width = max(40, width)
        text = Text(no_wrap=True, overflow="ellipsis")
        self.rows = {}
        if gpus is None and host is None:
            text.append(_("meters: sampling..."), "dim")
        if gpus is not None and gpus.gpus:
            for gpu in gpus.gpus:
                self._gpu_row(text, gpu, pid_rank, width)
        if host is not None and (backend != "nccl" or gpus is None or not gpus.gpus):
            if gpus is not None and not gpus.gpus and gpus.error:
                text.append(_("no GPU meters ({why}): CPU ranks shown").format(why=said(gpus.error)) + "\n", "dim")
            for pid, rank in sorted(pid_rank.items(), key=lambda item: item[1]):
                self._cpu_row(text, rank, pid, host, width)
            cores = host.cpu_percent_per_core
            busy = sum(cores) / len(cores) if cores else 0.0
            text.append(_("host  {cores} cores {busy:3.0f}%  RAM {used}/{total} GiB").format(
                cores=len(cores), busy=busy, used=_gib(host.ram_used_mib), total=_gib(host.ram_total_mib)), "dim")
        text.rstrip()
        return text

    def _gpu_row(self, text: Text, gpu: GpuSnapshot, pid_rank: dict[int, int], width: int) -> None:
        ranks = ranks_on(gpu, pid_rank)
        others = len(gpu.processes) - sum(1 for p in gpu.processes if p.pid in pid_rank)
        who = ",".join(f"r{r}" for r in ranks) or "—"
        if others:
            who += " " + _("+{count} other").format(count=others)
        util = gpu.utilization_pct
        power = "?" if gpu.power_w is None else f"{gpu.power_w:.0f}"
        limit = "" if gpu.power_limit_w is None else f"/{gpu.power_limit_w:.0f}"
        temp = "?" if gpu.temperature_c is None else str(gpu.temperature_c)
        head = f"GPU{gpu.index} "
        util_s = f"{bar(util, 8)} {'?' if util is None else util:>3}% "
        mem = f"mem {_gib(gpu.memory_used_mib)}/{_gib(gpu.memory_total_mib)}G "
        rest = f"{power}{limit}W {temp}°C "
        spark_w = max(0, width - len(head) - len(util_s) - len(mem) - len(rest) - len(who) - 2)
        spark = sparkline(self._remember(f"gpu{gpu.index}", None), spark_w, low=0, high=100)
        text.append(head, "bold")
        text.append(util_s, "green" if (util or 0) >= 50 else "yellow")
        text.append(mem)
        text.append(rest, "dim")
        text.append(f"{spark:<{spark_w}} ", "green")
        colour = RANK_COLOURS[ranks[0] % len(RANK_COLOURS)] if ranks else "dim"
        text.append(who + "\n", f"bold {colour}")
        self.rows[f"gpu{gpu.index}"] = f"{head}{util_s}{mem}{rest}{who}"

    def _cpu_row(self, text: Text, rank: int, pid: int, host: HostSnapshot, width: int) -> None:
        stats = host.processes.get(pid)
        head = f"rank{rank} pid {pid} "
        if stats is None:
            body = _("(process ended)")
            spark_w = 0
        else:
            body = f"cpu {bar(min(stats.cpu_percent, 100.0), 8)} {stats.cpu_percent:4.0f}%  rss {stats.rss_mib:6.0f} MiB "
            spark_w = max(0, width - len(head) - len(body) - 1)
        spark = sparkline(list(self.history.get(f"rank{rank}", [])), spark_w, low=0)
        text.append(head, f"bold {RANK_COLOURS[rank % len(RANK_COLOURS)]}")
        text.append(body)
        text.append(spark + "\n", "green")
        self.rows[f"rank{rank}"] = head + body
