"""Monitor mode."""
from __future__ import annotations

from mgtutor.tui.screens.placeholder import PlaceholderScreen


class MonitorScreen(PlaceholderScreen):
    TITLE = "Monitor"
    ABOUT = "Launch a run and watch every rank's log and every GPU's meters."
