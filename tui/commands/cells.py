"""Text padded to a width in terminal cells, for the commands' tables: a Chinese character takes two
cells, so `format(text, ">10")` misaligns a column once its heading is translated."""
from __future__ import annotations

from rich.cells import cell_len


def left(text: str, width: int) -> str:
    return text + " " * max(width - cell_len(text), 0)


def right(text: str, width: int) -> str:
    return " " * max(width - cell_len(text), 0) + text
