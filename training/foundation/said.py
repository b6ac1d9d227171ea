"""Words kept as their English message id and its arguments, said in the reader's language when shown.

A record that keeps rendered text stays in the language it was made in; one that keeps a `Said`
(`{"msg": msgid, "args": {...}}`) is said again in whatever language reads it, e.g. a lesson's check
results after the app switched language. A `Said` is also the text it was made as (a `str`), so
code that prints it or looks inside it is unchanged.

    detail = Said(N_("rank {rank} failed ({how})"), rank=1, how=Said(N_("exit code {code}"), code=2))
    progress["detail"] = detail.to_json()      # kept
    say_kept(progress["detail"])               # shown, in the language in force
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import suppress
from enum import Enum
from typing import Any

from mgtutor.training.foundation.i18n import _, in_language

_MAX_DEPTH = 4  # a kept Said nests a few levels (a reason inside a reason), never more


class Said(str):
    """A message id with its arguments; the str is its text in the language in force when made."""

    msgid: str
    args: dict[str, Any]

    def __new__(cls, msgid: str, **args: Any) -> Said:
        kept = {name: _plain(value) for name, value in args.items()}
        said = super().__new__(cls, _say(msgid, kept))
        said.msgid, said.args = msgid, kept
        return said

    def again(self) -> str:
        """The words in the language in force now."""
        return _say(self.msgid, self.args)

    def to_json(self) -> dict[str, Any]:
        return {"msg": self.msgid, "args": {name: value.to_json() if isinstance(value, Said) else
                                            str(value) if isinstance(value, str) else value
                                            for name, value in self.args.items()}}

    @classmethod
    def from_json(cls, data: Any, depth: int = 0) -> Said | None:
        """A kept Said; None for anything else (a record of another shape is shown as nothing, not raised)."""
        if not isinstance(data, Mapping) or not isinstance(data.get("msg"), str) or depth > _MAX_DEPTH:
            return None
        found = data.get("args")
        args: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        values = {str(name): cls.from_json(value, depth + 1) if isinstance(value, Mapping) else value
                  for name, value in args.items()
                  if value is None or isinstance(value, (str, int, float, bool, Mapping))}
        return cls(data["msg"], **values)


class SaidReport(dict[str, Any]):
    """A report kept in English (printed by --json, saved) whose words, `said`, are said in the language in
    force when read: a screen that shows it again after a switch of language says it in the new one. A
    report read back from disk has no `say` and keeps its English (`kept_key`)."""

    kept_key = ""
    say: Callable[[Callable[[str], str]], str] | None = None

    @property
    def said(self) -> str:
        return self.say(_) if self.say else str(self.get(self.kept_key, ""))


def _plain(value: Any) -> Any:
    """An argument as JSON keeps it: a list, a dict or an enum as the text it was said as."""
    if isinstance(value, Said) or value is None or type(value) in (str, int, float, bool):
        return value
    return str(value.value if isinstance(value, Enum) else value)


def _say(msgid: str, args: Mapping[str, Any]) -> str:
    said = {name: value.again() if isinstance(value, Said) else value for name, value in args.items()}
    if not said:
        return _(msgid)
    with suppress(KeyError, IndexError, ValueError):  # a record of another version: another message's fields
        return _(msgid).format(**said)
    return msgid


def english(msgid: str, **args: Any) -> Said:
    """A Said whose text is its English: what a record keeps, `--json` prints and code compares; the reader
    sees it in their language through `said_again`. Nothing has to be parsed back out of the English."""
    with in_language("en"):
        return Said(msgid, **args)


def keep(value: str | None) -> Any:
    """What a record keeps of some words: a Said as its message id and arguments, other text as it is."""
    return value.to_json() if isinstance(value, Said) else value


def say_kept(value: Any) -> str:
    """Words a record kept, in the language in force: a Said said again; text kept as text (by an older
    version) translated where it is a whole message, else as written."""
    if isinstance(value, Mapping):
        said = Said.from_json(value)
        return said.again() if said is not None else ""
    return _(value) if isinstance(value, str) else ""


def kept_in_english(value: Any) -> str:
    """Words a record kept, in English: for matching them (a skip reason that names the NVIDIA GPU)."""
    with in_language("en"):
        return say_kept(value)


def in_english(value: str) -> str:
    """Words in English, as records and `--json` keep them: a Said said again in English, other text as it is."""
    if not isinstance(value, Said):
        return value
    with in_language("en"):
        return value.again()


def said_again(value: str) -> str:
    """Words in the language in force now: a Said said again; other text translated where it is a whole message."""
    return value.again() if isinstance(value, Said) else _(value)


def kept_or_text(value: Any) -> str:
    """One item of a list a record keeps with `keep`: a Said again, other text as it is."""
    return (Said.from_json(value) or "") if isinstance(value, Mapping) else str(value)
