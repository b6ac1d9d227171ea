"""One block-character renderer for every chart (issue 27 item 17): the sparkline rows (training,
GPU meters) and the bandwidth chart's columns share it."""
from __future__ import annotations

from conftest import REPO
from mgtutor.tui.widgets.bandwidth_chart import render_chart
from mgtutor.tui.widgets.blocks import BLOCKS, block, sparkline


def test_the_block_characters_are_defined_once_in_the_app():
    defining = [p.relative_to(REPO).as_posix() for p in (REPO / "tui").rglob("*.py") if "▁▂▃▄▅▆▇█" in p.read_text()]
    assert defining == ["tui/widgets/blocks.py"]


def test_a_sparkline_keeps_a_fixed_scale_and_the_newest_values():
    assert sparkline([0, 50, 100], 3, low=0, high=100) == "▁▅█"
    assert sparkline([50, 50], 5, low=0, high=100) == "▅▅"  # half way up on a 0–100 scale, not full
    assert sparkline([1, 2, 3, 4], 2) == "▁█"  # the last two, between their own min and max
    assert sparkline([float("nan"), 3.0], 4) == "█"  # a flat line still shows
    assert sparkline([], 4) == "" and sparkline([1.0], 0) == ""


def test_a_cell_fills_by_eighths_and_the_bandwidth_chart_uses_them():
    assert [block(f) for f in (-1, 0, 0.5, 1, 2)] == [" ", " ", BLOCKS[4], "█", "█"]
    lines = render_chart([(1024, 10.0), (1 << 20, 20.0)], height=2, width=20)
    assert lines[0].lstrip().startswith("20.0│") and lines[0].endswith("██ ")  # 20 GB/s: a full column
    assert lines[1].lstrip().startswith("0│██ ██")  # 10 GB/s of 20: the lower row only
