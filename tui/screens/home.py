"""Home: what this machine has, the way forward, and the language (z switches 中文 / English)."""
from __future__ import annotations

from rich.table import Table
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Static

from mgtutor.lessons.progress import Progress
from mgtutor.training.foundation.i18n import N_, _, current_language, set_language
from mgtutor.training.runs.nvml import Inventory, inventory, said
from mgtutor.tui.screens.from_thread import call_on_screen
from mgtutor.tui.widgets.mode_footer import ModeFooter

WAY_FORWARD = [
    ("l", N_("Lessons"), N_("learn by running: one GPU → DataParallel → DDP → scaling, each step checked")),
    ("d", N_("Diagnostics"), N_("is this machine ready? versions, topology, all-reduce bandwidth")),
    ("m", N_("Monitor"), N_("launch a training run and watch every rank and every GPU live")),
    ("t", N_("Troubleshoot"), N_("a hang, an OOM, an NCCL error: from symptom to cause and fix")),
    ("r", N_("Runs"), N_("past and running runs; reattach, diagnose")),
    ("?", N_("Help"), N_("every key")),
    ("z", "中文/English", N_("switch the language (kept with your progress; runs go on)")),
]


def way_forward() -> Table:
    """A grid, so that a description that wraps at 80 columns stays in its own column."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_column(ratio=1)
    for key, mode, what in WAY_FORWARD:
        grid.add_row(f" {key}", _(mode), _(what))
    return grid


def describe_machine(inv: Inventory) -> str:
    if not inv.gpus:
        return (_("[b]No NVIDIA GPU[/b] — {why}.").format(why=said(inv.error)) + "\n" +
                _("[b]CPU mode:[/b] ranks run as CPU processes on the gloo backend. Every lesson and "
                  "command still works; GPU-only steps say so."))
    lines = [_("[b]{count} NVIDIA GPU(s)[/b], driver {driver} — ranks run on NCCL").format(
        count=len(inv.gpus), driver=inv.driver or "?")]
    for gpu in inv.gpus:
        memory = f"{gpu.memory_total_mib / 1024:.0f} GiB" if gpu.memory_total_mib else _("memory ?")
        lines.append(f"  GPU {gpu.index}  {gpu.name}  {memory}")
    return "\n".join(lines)


class HomeScreen(Screen):
    TITLE = N_("Home")
    # The description names the other language, in that language: "中文" in English, "English" in Chinese.
    BINDINGS = [Binding("z", "switch_language", N_("中文"), tooltip=N_("switch the language: 中文 / English"))]

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(classes="mode-body"):
            yield Static(_("[b]mgtutor[/b] — from one GPU to many, by running it for real."), id="tagline")
            yield Static(_("This machine"), classes="section-title")
            yield Static(_("looking for GPUs..."), id="machine", classes="machine-summary")
            yield Static(_("The way forward"), classes="section-title")
            yield Static(way_forward(), id="way-forward")
        yield ModeFooter()

    def on_mount(self) -> None:
        self.load_machine()

    async def action_switch_language(self) -> None:
        """Every later word in the other language; kept for the next start. Runs belong to the App
        and go on; other modes say their words anew when they are next shown."""
        language = set_language("en" if current_language() == "zh" else "zh")
        Progress().set_language(language)
        await self.recompose()
        self.load_machine()

    @work(thread=True, exclusive=True)
    def load_machine(self) -> None:
        inv = inventory()
        call_on_screen(self, self._show_machine, inv)

    def _show_machine(self, inv: Inventory) -> None:
        machine = self.query_one("#machine", Static)
        machine.update(describe_machine(inv))
        machine.set_class(not inv.gpus, "cpu-mode")
