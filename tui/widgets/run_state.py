"""The run's state line (phase, elapsed, ranks), live alerts, a multi-node run's node line, and,
when it fails, the banner that says why."""
from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.diagnostics.failures.classify import Finding
from mgtutor.diagnostics.failures.kind_titles import kind_title
from mgtutor.training.runs.net.multinode import NodeState
from mgtutor.training.runs.follow.runstate import RunState, describe_failure
from mgtutor.training.runs.follow.detectors import Alert
from mgtutor.tui.widgets.rank_logs import RANK_COLOURS

PHASES = ("starting", "rendezvous", "training")
PHASE_WORDS = {"starting": N_("starting"), "rendezvous": N_("rendezvous"), "training": N_("training"),
               "running": N_("running"), "finished": N_("finished"), "failed": N_("failed"), "stopped": N_("stopped"),
               "lost": N_("lost")}
PHASE_STYLE = {"starting": "yellow", "rendezvous": "yellow", "training": "green", "running": "green",
               "finished": "bold green", "failed": "bold red", "stopped": "bold yellow", "lost": "bold red"}


def clock(seconds: float) -> str:
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def state_text(state: RunState, now: float) -> Text:
    """Line 1: the phase path and facts; line 2: per-rank rendezvous, last step (a rank whose steps stopped
    while the others go on shows it) or outcome."""
    text = Text(no_wrap=True, overflow="ellipsis")
    path = [p for p in PHASES if p in state.phases_seen or p == state.phase]
    if state.phase not in PHASES:
        path.append(state.phase)
    for index, phase in enumerate(path):
        if index:
            text.append(" → ", "dim")
        text.append(_(PHASE_WORDS.get(phase, phase)), PHASE_STYLE.get(phase, "") if phase == state.phase else "dim")
    steps = [r.last_step for r in state.ranks.values() if r.last_step is not None]
    text.append(f"   {clock(state.elapsed(now))}", "bold")
    text.append("  " + (_("{n} rank {backend}") if state.world_size == 1 else _("{n} ranks {backend}")).format(
        n=state.world_size, backend=state.backend))
    if steps:
        text.append("  " + _("step {step}").format(step=max(steps)))
    text.append(f"  {state.run_id}", "dim")
    text.append("\n")
    for rank, rank_state in sorted(state.ranks.items()):
        colour = RANK_COLOURS[rank % len(RANK_COLOURS)]
        text.append(f"r{rank} ", f"bold {colour}")
        if state.done:
            ok = rank_state.exit_code == 0
            outcome = (_("ok") if ok else
                       _("signal {signal}").format(signal=rank_state.signal) if rank_state.signal else
                       _("exit {code}").format(code=rank_state.exit_code) if rank_state.exit_code is not None else
                       _("no exit recorded"))
            text.append(outcome, "green" if ok else "red")
            if rank_state.last_step is not None:
                text.append(f" @{rank_state.last_step}", "dim")  # where each rank's steps ended
        elif rank_state.started is None:
            text.append(_("not started"), "dim")
        elif rank_state.joined is not None:
            waited = rank_state.waited(now) or 0.0
            text.append(_("joined ({seconds:.1f}s)").format(seconds=waited) if rank_state.last_step is None
                        else _("step {step}").format(step=rank_state.last_step), "green")  # each rank's own
        elif state.has_events:
            text.append(_("waiting {seconds:.0f}s").format(seconds=rank_state.waited(now) or 0), "yellow")
        else:
            text.append(_("running"), "green")
        text.append("  ")
    return text


class RunStateLine(Static):
    DEFAULT_CSS = "RunStateLine { height: 2; }"

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.plain = ""

    def show(self, state: RunState, now: float) -> None:
        text = state_text(state, now)
        self.plain = text.plain
        self.update(text, layout=False)  # two lines, always: no layout pass 4 times a second


class FailureBanner(VerticalScroll):
    """Hidden until the run fails; then the record's facts first, the diagnosis (if any) below. It grows
    with the diagnosis up to half the run view and scrolls beyond (it takes the keys when focused): the
    fix is never cut off."""

    DEFAULT_CSS = """
    FailureBanner { display: none; height: auto; max-height: 50%; background: $error 30%; padding: 0 1; }
    FailureBanner.-visible { display: block; }
    FailureBanner > Static { height: auto; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(Static("", classes="failure-text"), **kwargs)  # type: ignore[arg-type]
        self.plain = ""
        self.lesson: str | None = None
        self.kind: str | None = None  # the diagnosis's kind (cuda_oom: B finds the batch that fits)

    def show(self, state: RunState, finding: Finding | None = None) -> None:
        headline = describe_failure(state)
        self.set_class(headline is not None, "-visible")
        words = self.query_one(".failure-text", Static)
        self.kind = finding.kind if finding and headline is not None else None
        if headline is None:
            self.plain, self.lesson = "", None
            words.update("")
            return
        text = Text()
        text.append("✗ ", "bold red")
        text.append(headline, "bold")
        self.lesson = None
        if finding:
            text.append("\n" + (kind_title(finding.kind) or _("diagnosis")) + _(": "), "bold")
            text.append(finding.summary or "")
            if finding.fix:
                text.append("\n" + _("fix: "), "bold")
                text.append(finding.fix)
            self.lesson = finding.lesson or None
            if self.lesson:
                text.append("  " + _("(o: open lesson {lesson})").format(lesson=self.lesson), "dim")
            if self.kind == "cuda_oom":
                text.append("  " + _("(B: find the batch that fits)"), "dim")
        if text.plain != self.plain:
            self.scroll_home(animate=False)
        self.plain = text.plain
        words.update(text)


class AlertBanner(Static):
    """The live detectors' alerts (training/runs/follow/detectors.py) while the run goes on: who is missing at the
    rendezvous, who straggles, a run that went silent (with each rank's last lines)."""

    DEFAULT_CSS = """
    AlertBanner { display: none; height: auto; max-height: 6; background: $warning 25%; padding: 0 1; }
    AlertBanner.-visible { display: block; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.plain = ""
        self.alerts: list[Alert] = []

    def show(self, alerts: list[Alert]) -> None:
        self.alerts = list(alerts)
        was_visible = self.has_class("-visible")
        self.set_class(bool(alerts), "-visible")
        if not alerts and not self.plain:
            return  # nothing shown, nothing to show: no repaint, no layout
        text = Text()
        for index, alert in enumerate(alerts):
            if index:
                text.append("\n")
            text.append("⚠ ", "bold yellow")
            text.append(alert.message)
            for rank, lines in sorted(alert.last_lines.items()):
                if lines and alert.kind == "possibly_hung":
                    colour = RANK_COLOURS[rank % len(RANK_COLOURS)]
                    text.append("\n  " + _("r{rank} last: ").format(rank=rank), f"bold {colour}")
                    text.append(lines[-1][:200], "dim")
        relayout = was_visible != bool(alerts) or text.plain.count("\n") != self.plain.count("\n")
        self.plain = text.plain
        self.update(text, layout=relayout)


def node_text(node: NodeState) -> Text:
    """One line for one node of a multi-node job: which node, where, which ranks, how far."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(_("node {node}/{nodes}").format(node=node.node_rank, nodes=node.nnodes), "bold")
    host = node.host or None
    where = node.local_addr or host or "?"
    text.append(f"  {host or '?'}" + (f" ({where}" if where != host else ""))
    if node.iface:
        text.append(f" via {node.iface}" if where == host else f" via {node.iface})")
    elif where != host:
        text.append(")")
    text.append(f"  rdzv {node.rdzv_endpoint or '?'}")
    if node.rdzv_id:
        text.append(f" id {node.rdzv_id}", "dim")
    ranks = node.global_ranks
    if ranks:
        span = f"{ranks[0]}–{ranks[-1]}" if ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2 else \
            ",".join(map(str, ranks))
        text.append("  " + _("ranks {span}").format(span=span))
    phase = node.phase
    said = _(PHASE_WORDS.get(phase, phase))
    text.append(f"  {said}", PHASE_STYLE.get(phase, "yellow" if "waiting" in phase else ""))
    return text


class NodeLine(Static):
    """Shown only for a multi-node run: this node's part of the job."""

    DEFAULT_CSS = """
    NodeLine { display: none; height: 1; }
    NodeLine.-visible { display: block; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__("", **kwargs)  # type: ignore[arg-type]
        self.plain = ""

    def show(self, node: NodeState | None) -> None:
        self.set_class(node is not None, "-visible")
        text = node_text(node) if node is not None else Text()
        if text.plain != self.plain:
            self.plain = text.plain
            self.update(text, layout=False)  # one line
