"""Lessons mode."""
from __future__ import annotations

from mgtutor.tui.screens.placeholder import PlaceholderScreen


class LessonsScreen(PlaceholderScreen):
    TITLE = "Lessons"
    ABOUT = "The guided path from one GPU to many; each lesson runs and checks."
