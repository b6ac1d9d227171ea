"""Home: what this machine has, and the way forward."""
from __future__ import annotations

from rich.table import Table
from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Static

from mgtutor.training.runs.nvml import Inventory, inventory
from mgtutor.tui.widgets.mode_footer import ModeFooter

WAY_FORWARD = [
    ("l", "Lessons", "learn by running: one GPU → DataParallel → DDP → scaling, each step checked"),
    ("d", "Diagnostics", "is this machine ready? versions, topology, all-reduce bandwidth"),
    ("m", "Monitor", "launch a training run and watch every rank and every GPU live"),
    ("t", "Troubleshoot", "a hang, an OOM, an NCCL error: from symptom to cause and fix"),
    ("r", "Runs", "past and running runs; reattach, diagnose"),
    ("?", "Help", "every key"),
]


def way_forward() -> Table:
    """A grid, so that a description that wraps at 80 columns stays in its own column."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(no_wrap=True)
    grid.add_column(ratio=1)
    for key, mode, what in WAY_FORWARD:
        grid.add_row(f" {key}", mode, what)
    return grid


def describe_machine(inv: Inventory) -> str:
    if not inv.gpus:
        return (f"[b]No NVIDIA GPU[/b] — {inv.error}.\n"
                "[b]CPU mode:[/b] ranks run as CPU processes on the gloo backend. Every lesson and "
                "command still works; GPU-only steps say so.")
    lines = [f"[b]{len(inv.gpus)} NVIDIA GPU(s)[/b], driver {inv.driver or '?'} — ranks run on NCCL"]
    for gpu in inv.gpus:
        memory = f"{gpu.memory_total_mib / 1024:.0f} GiB" if gpu.memory_total_mib else "memory ?"
        lines.append(f"  GPU {gpu.index}  {gpu.name}  {memory}")
    return "\n".join(lines)


class HomeScreen(Screen):
    TITLE = "Home"

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(classes="mode-body"):
            yield Static("[b]mgtutor[/b] — from one GPU to many, by running it for real.", id="tagline")
            yield Static("This machine", classes="section-title")
            yield Static("looking for GPUs…", id="machine", classes="machine-summary")
            yield Static("The way forward", classes="section-title")
            yield Static(way_forward(), id="way-forward")
        yield ModeFooter()

    def on_mount(self) -> None:
        self.load_machine()

    @work(thread=True, exclusive=True)
    def load_machine(self) -> None:
        inv = inventory()
        self.app.call_from_thread(self._show_machine, inv)

    def _show_machine(self, inv: Inventory) -> None:
        machine = self.query_one("#machine", Static)
        machine.update(describe_machine(inv))
        machine.set_class(not inv.gpus, "cpu-mode")
