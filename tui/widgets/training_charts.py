"""Throughput (per rank and total) and loss as sparkline rows, drawn with block characters.

A row per series: `r0 ▂▃▅▆▇█▇ 1.2k/s`. The stragglers' rows say so. One widget re-rendered a few
times a second; the rows come from the app's one block renderer (tui/widgets/blocks.py says why
not Textual's Sparkline).
"""
from __future__ import annotations

import math

from rich.text import Text
from textual.widget import Widget

from mgtutor.training.foundation.i18n import N_, _, ljust_cells
from mgtutor.training.runs.follow.runstate import BatchSearch, RunState
from mgtutor.training.runs.records.record import RunStatus
from mgtutor.tui.widgets.blocks import sparkline
from mgtutor.tui.widgets.rank_logs import RANK_COLOURS

def human(value: float | None, unit: str = "") -> str:
    if value is None or not math.isfinite(value):
        return "—"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.1f}{suffix}{unit}"
    return f"{value:.1f}{unit}" if abs(value) < 100 else f"{value:.0f}{unit}"



_ENDED_BEFORE_A_STEP = {
    RunStatus.FAILED.value: N_("the run failed before any training step was recorded"),
    RunStatus.STOPPED.value: N_("the run was stopped before any training step was recorded"),
    RunStatus.LOST.value: N_("the run ended without a result before any training step was recorded"),
}


def no_steps_text(state: RunState) -> str:
    """What the charts say before they have a point: a run that ended says what happened, never that it
    waits for its first step (a batch finder's run: its trials)."""
    steps = [r.last_step for r in state.ranks.values() if r.last_step is not None]
    if steps:
        return _("step {step}: no samples/s or loss to chart (no tensor batch from a DataLoader, no scalar "
                 "loss's backward seen)").format(step=max(steps))
    if state.batch_search is not None:
        return batch_search_text(state, state.batch_search)
    if not state.done:
        return _("waiting for the first step...")
    if state.phase in _ENDED_BEFORE_A_STEP:
        return _(_ENDED_BEFORE_A_STEP[state.phase])
    return _("no optimizer steps were seen: the run wrote no step events (a script that never steps a torch "
             "optimizer, or one run with --no-instrument; logs and meters still work)")


def batch_search_text(state: RunState, search: BatchSearch) -> str:
    """The batch finder's progress, or how the run ended while it searched."""
    last = ""
    if search.batch is not None:
        last = (_("batch {batch} fits") if search.fits else _("batch {batch} does not fit")).format(batch=search.batch)
    if search.chosen is not None:
        return _("the batch finder chose batch {batch} after {trials} trial(s); no training step was recorded").format(
            batch=search.chosen, trials=search.trials)
    if not state.done:
        return _("finding the batch size: trial {trials}, {last}").format(trials=search.trials, last=last) \
            if last else _("finding the batch size...")
    if state.phase in _ENDED_BEFORE_A_STEP:
        return _("{ended}, during the batch finder's trial {trials} ({last})").format(
            ended=_(_ENDED_BEFORE_A_STEP[state.phase]), trials=search.trials, last=last or "?")
    return _("the batch finder ran {trials} trial(s) ({last}) and gave no answer; no training step was "
             "recorded").format(trials=search.trials, last=last or "?")


class TrainingCharts(Widget):
    """Samples/s per rank and in total, and loss; from the run's step events."""

    DEFAULT_CSS = "TrainingCharts { height: auto; }"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.state: RunState | None = None
        self.points = 0  # how many throughput points the charts hold (tests read it)
        self._lines = -1

    def show(self, state: RunState) -> None:
        self.state = state
        self.points = sum(len(r.throughput) for r in state.ranks.values())
        lines = self.render_charts(max(20, self.size.width)).plain.count("\n")
        self.refresh(layout=lines != self._lines)  # a layout pass only when the height changes
        self._lines = lines

    def render(self) -> Text:
        return self.render_charts(max(20, self.size.width))

    def render_charts(self, width: int) -> Text:
        state = self.state
        text = Text(no_wrap=True, overflow="ellipsis")
        if state is None:
            return text
        label_w, value_w = 7, 16
        spark_w = max(8, width - label_w - value_w - 2)
        if not any(r.throughput or r.loss for r in state.ranks.values()):
            text.append(ljust_cells(_("charts"), label_w), "bold")
            text.append(no_steps_text(state), "dim")
            return text
        for rank, rank_state in sorted(state.ranks.items()):
            values = [v for _, v in rank_state.throughput]
            colour = RANK_COLOURS[rank % len(RANK_COLOURS)]
            text.append(f"{'r' + str(rank):<{label_w}}", f"bold {colour}")
            text.append(f"{sparkline(values, spark_w, low=0):<{spark_w}} ", colour)
            value = human(values[-1] if values else None, "/s")
            text.append(f"{value:>8}", "bold")
            text.append(" " + _("slow!") if rank_state.straggler else "", "bold red")
            text.append("\n")
        totals = [v for _, v in state.total_throughput]
        text.append(ljust_cells(_("total"), label_w), "bold")
        text.append(f"{sparkline(totals, spark_w, low=0):<{spark_w}} ", "bold")
        text.append(f"{human(totals[-1] if totals else None, '/s'):>8}\n", "bold")
        loss_rank = min((r for r, s in state.ranks.items() if s.loss), default=None)
        losses = [v for _, v in state.ranks[loss_rank].loss] if loss_rank is not None else []
        text.append(ljust_cells(_("loss"), label_w), "bold")
        text.append(f"{sparkline(losses, spark_w):<{spark_w}} ", "yellow")
        step = state.ranks[loss_rank].last_step if loss_rank is not None else None
        text.append(f"{human(losses[-1] if losses else None):>8}", "bold")
        if step is not None:
            text.append(f" @{step}", "dim")
        stragglers = state.stragglers()
        if stragglers:
            text.append("\n" + _("straggler: rank {ranks} >{share} slower than the others (shared or throttled GPU, slow "
                                "data loading?)").format(ranks=", ".join(map(str, stragglers)), share="20%"), "bold red")
        return text
