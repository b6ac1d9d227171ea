"""Troubleshoot mode."""
from __future__ import annotations

from mgtutor.tui.screens.placeholder import PlaceholderScreen


class TroubleshootScreen(PlaceholderScreen):
    TITLE = "Troubleshoot"
    ABOUT = "Pick a symptom; get the cause and the fix."
