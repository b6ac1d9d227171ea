"""Text from a run put into the Markdown issue body as GitHub shows it, never as markup.

An exception message, a hang's "in <module>", a GPU name or a variable's value comes from the run's logs
and record: in the body `![x](https://…)` would become an image, `@name` a mention, and a bare
`<module>` or `<redacted>` would be eaten as an HTML tag. Each place in the template says which kind
of text it holds: prose (`md`), an inline code span (`code`), or the text of an HTML element such as
<summary> (`html`), where Markdown's backslash escapes are not read.
"""
from __future__ import annotations

import re

# What makes links and images, emphasis and struck text. Backticks stay: the catalogue's sentences mark
# code with them, and a code span only ever makes text more literal. An underscore inside a word is no
# emphasis on GitHub (no_distributed_sampler stays as it is).
_MARKDOWN = re.compile(r"([\\*\[\]~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
_CODE_SPAN = re.compile(r"((`+)[^`].*?(?<!`)\2(?!`))")  # `code`, ``co`de``: the same run closes it
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")  # @name: a ping to that GitHub user, @org/team to a team
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}


def _unmentioned(text: str) -> str:
    """A zero-width space after the @ (as an entity): it reads the same and pings nobody."""
    return _MENTION.sub("@&#8203;", text)


def _one_line(text: object) -> str:
    """New lines would start a list, a heading or a quote; in a sentence they are spaces."""
    return " ".join(str(text).split())


def html_text(text: object) -> str:
    """For the inside of an HTML element (<summary>): entities, and no mention."""
    escaped = "".join(_HTML.get(ch, ch) for ch in _one_line(text))
    return _unmentioned(escaped)


def md_text(text: object) -> str:
    """For prose: backslash before Markdown's own characters, entities for HTML's, and no mention; a code
    span in it (the catalogue's `torch.cuda.set_device(...)`) is left as it is, GitHub reads nothing there."""
    parts = _CODE_SPAN.split(_one_line(text))  # text, span, its backticks, text, …
    out = []
    for index, part in enumerate(parts):
        if index % 3 == 0:
            escaped = _MARKDOWN.sub(lambda m: "\\" + m.group(0), part)
            out.append(_unmentioned("".join(_HTML.get(ch, ch) for ch in escaped)))
        elif index % 3 == 1:
            out.append(part)
    return "".join(out)


def md_code(text: object) -> str:
    """An inline code span holding `text` as it is (GitHub reads nothing inside one): fenced by more
    backticks than any run in it, with a space inside where it starts or ends with one."""
    line = _one_line(text)
    longest = max((len(run) for run in re.findall(r"`+", line)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"
