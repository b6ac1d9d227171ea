"""Diagnostics mode."""
from __future__ import annotations

from mgtutor.tui.screens.placeholder import PlaceholderScreen


class DiagnosticsScreen(PlaceholderScreen):
    TITLE = "Diagnostics"
    ABOUT = "Doctor checklist, GPU topology, the all-reduce benchmark and the rendezvous probe."
