"""What a person can read on a screen, as text: the whole of each shown widget's words, those scrolled
out of sight too (a Static's text, a table's cells, a log's lines, a lesson's Markdown source, the
footer's keys), and the drawn rows of what draws itself (meters, charts, the header). `english_left`
reads it.

Code and log lines stay as they are in every language: a lesson's code blocks and code tab, a rank's
log, a demo's output are left out."""
from __future__ import annotations

import io
import re

from rich.console import Console
from textual.content import Content
from textual.strip import Strip
from textual.widget import Widget
from markdown_it import MarkdownIt
from textual.widgets import DataTable, Log, Markdown, OptionList, RichLog, Static
from textual.widgets._footer import FooterKey
from textual.widgets._markdown import MarkdownFence

# Code and logs: kept as they are (a Log is a rank's or a demo's output; #lesson-code a lesson's script,
# #patch-diff the fixes to the user's script).
VERBATIM = (MarkdownFence, Log)
VERBATIM_IDS = ("lesson-code", "patch-diff")
VERBATIM_CLASSES = ("hang-stack",)  # a rank's Python stack, folded under the hang report
READ_WHOLE = (Static, DataTable, RichLog, OptionList, Markdown, FooterKey)  # their words: `widget_words`
RANK_LINE = re.compile(r"^r\d+│")  # a rank's own line in the Lessons run pane


def shown(widget: Widget) -> bool:
    """The widget and every container above it are displayed (an inactive tab's pane is not)."""
    return all(node.display and node.visible for node in widget.ancestors_with_self if isinstance(node, Widget))


def verbatim(widget: Widget) -> bool:
    return any(isinstance(node, VERBATIM) or node.id in VERBATIM_IDS or node.has_class(*VERBATIM_CLASSES)
               for node in widget.ancestors_with_self)


def rows(screen) -> list[str]:
    """The screen's rows exactly as the terminal shows them."""
    return [strip.text for strip in screen._compositor.render_strips()]


def drawn(screen) -> list[str]:
    """The screen's rows as the terminal shows them, for what draws itself (meters, charts, the header):
    the cells of code and logs, and of widgets whose whole text is read from them, are blanked."""
    strips = screen._compositor.render_strips()
    for widget in screen.query("*"):
        if not isinstance(widget, READ_WHOLE + VERBATIM) and widget.id not in VERBATIM_IDS or not shown(widget):
            continue
        region = widget.region
        for y in range(region.y, min(region.bottom, len(strips))):
            strip = strips[y]
            strips[y] = Strip.join([strip.crop(0, region.x), Strip.blank(region.width), strip.crop(region.right)])
    return [strip.text for strip in strips]


def plain(renderable: object, width: int = 76) -> str:
    if isinstance(renderable, Content):
        return renderable.plain
    if isinstance(renderable, str):
        return Content.from_markup(renderable).plain
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def prose(markdown: str) -> str:
    """Markdown source without its code blocks (fenced or indented); code spans keep their backticks."""
    lines = markdown.splitlines()
    for token in MarkdownIt("commonmark").parse(markdown):
        if token.type in ("fence", "code_block") and token.map:
            lines[token.map[0]:token.map[1]] = [""] * (token.map[1] - token.map[0])
    return "\n".join(lines)


def own_lines(rows: list[str]) -> list[str]:
    """The Lessons run pane's own rows: a rank's line (r0│ ...) is its output, and so are the rows it
    wraps onto; mgtutor's lines (── step: ...) and what it says between them stay."""
    own, rank_output = [], False
    for row in rows:
        if RANK_LINE.match(row):
            rank_output = True
        elif row.startswith("──"):
            rank_output = False
        if not rank_output:
            own.append(row)
    return own


def widget_words(widget: Widget) -> list[str]:
    if verbatim(widget) or any(isinstance(node, Markdown) for node in widget.ancestors):
        return []  # a Markdown's blocks are read from its source
    if isinstance(widget, Markdown):
        return [prose(widget.source)]
    if isinstance(widget, DataTable):
        cells = [plain(column.label) for column in widget.columns.values()]
        return cells + [plain(cell) for row in range(widget.row_count) for cell in widget.get_row_at(row)]
    if isinstance(widget, RichLog):
        return own_lines([strip.text for strip in widget.lines])
    if isinstance(widget, OptionList):
        return [plain(widget.get_option_at_index(i).prompt) for i in range(widget.option_count)]
    if isinstance(widget, FooterKey):
        return [f"{widget.key_display} {widget.description}"]
    if isinstance(widget, Static):
        return [plain(widget.content, max(widget.size.width, 20))]
    return []


def screen_text(screen) -> str:
    """All the words of the screen: drawn rows first, then each shown widget's full text."""
    words = drawn(screen)
    for widget in screen.query("*"):
        if shown(widget):
            words.extend(widget_words(widget))
    return "\n".join(words)
