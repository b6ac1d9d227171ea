"""The one block-character renderer of the app's charts: a sparkline row (throughput, loss, GPU use)
and the fill of one bar cell (the bandwidth chart's columns).

Why not Textual's `Sparkline`: it scales between the data's own minimum and maximum (a GPU at
0–100 % and throughput from 0 need a fixed scale: `low`/`high` here), spreads the data over the
whole width (the Monitor's rows grow from the left, one column per sample, the newest last), and
is a renderable of its own, where each chart row here is one line of Text with its label and value
(one widget re-rendered at 4 Hz, not three per row).
"""
from __future__ import annotations

import math
from collections.abc import Sequence

BLOCKS = " ▁▂▃▄▅▆▇█"  # 0…8 eighths of a cell


def block(fill: float) -> str:
    """The character for a cell filled `fill` (0…1) from the bottom, to the nearest eighth."""
    return BLOCKS[round(min(1.0, max(0.0, fill)) * 8)]


def sparkline(values: Sequence[float], width: int, low: float | None = None, high: float | None = None) -> str:
    """The last `width` finite values as block characters, scaled between low and high (default:
    their min and max); never blank for a value, so a flat line still shows."""
    if width <= 0:
        return ""
    tail = [v for v in values if math.isfinite(v)][-width:]
    if not tail:
        return ""
    low = min(tail) if low is None else low
    high = max(tail) if high is None else high
    span = high - low
    out = []
    for value in tail:
        level = 8 if span <= 0 else round((min(max(value, low), high) - low) / span * 7) + 1
        out.append(BLOCKS[level])
    return "".join(out)
