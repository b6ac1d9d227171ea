"""The user's language: English (the msgids) or Simplified Chinese, from gettext catalogues.

Every layer above imports `_` from here, so the words a person reads have one source. The catalogue
is a standard gettext `.po` (what translators edit) compiled to `.mo` (what the stdlib reads), both
shipped as package data under `locale/zh/LC_MESSAGES/`; Babel extracts and compiles them
(docs/architecture.md, "Translations"). Nothing here imports textual, rich or torch.

Strings in module-level tables are marked with `N_()` (extracted, not translated at import) and
translated with `_()` where they are shown, so that switching language at run time takes effect
on the next render without a restart.
"""
from __future__ import annotations

import gettext
import os
import re
import threading
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

DOMAIN = "mgtutor"
LOCALE_DIR = Path(__file__).with_name("locale")
LANGUAGES = ("en", "zh")          # English is the source language: its catalogue is the msgids
DEFAULT = "en"
# Locale variables in the order gettext reads them; LANGUAGE may list several, separated by ':'.
ENV_ORDER = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")
# Simplified Chinese under its usual spellings; Traditional (zh_TW, zh_HK, zh_Hant) is not it.
LANGUAGE_ENV = "MGTUTOR_LANGUAGE"  # the language mgtutor speaks, for the processes it starts
SIMPLIFIED = {"zh", "zh_cn", "zh_sg", "zh_hans", "zh_hans_cn", "zh_hans_sg", "chinese"}

_language = DEFAULT
_translations: gettext.NullTranslations = gettext.NullTranslations()


def normalize(tag: str) -> str | None:
    """'zh_CN.UTF-8', 'zh-Hans', 'zh' → 'zh'; 'en_US.UTF-8', 'C', 'POSIX' → 'en'; anything else → None."""
    base = tag.split(".", 1)[0].split("@", 1)[0].strip().replace("-", "_").lower()
    if base in SIMPLIFIED:
        return "zh"
    if base in ("c", "posix", "en") or base.startswith("en_"):
        return "en"
    return None


def language_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """The first locale variable that names a language we have, as gettext would pick it; None if
    none is set. A set variable in a language we lack (fr_FR) means English, not the next one."""
    env = os.environ if environ is None else environ
    for name in ENV_ORDER:
        value = env.get(name, "")
        if not value:
            continue
        for tag in value.split(":") if name == "LANGUAGE" else (value,):
            found = normalize(tag)
            if found:
                return found
        if name != "LANGUAGE":
            return DEFAULT
    return None


def _load(language: str | None) -> tuple[str, gettext.NullTranslations]:
    """The language actually available for a tag, and its catalogue (English: none needed)."""
    if (normalize(language) if language else None) == "zh":
        try:
            with (LOCALE_DIR / "zh" / "LC_MESSAGES" / f"{DOMAIN}.mo").open("rb") as catalogue:
                return "zh", gettext.GNUTranslations(catalogue)
        except OSError:
            pass
    return DEFAULT, gettext.NullTranslations()


def set_language(language: str | None) -> str:
    """Switch every later `_()` to this language ('zh', 'en', or a locale tag); returns the one in use.
    An unknown tag or a missing catalogue leaves English. Processes started later inherit it
    ($MGTUTOR_LANGUAGE): the trainer's ranks print their own lines in it (`inherited_language`)."""
    global _language, _translations
    _language, _translations = _load(language)
    os.environ[LANGUAGE_ENV] = _language
    return _language


def inherited_language() -> str:
    """For a worker: speak what the mgtutor that started it speaks, else what the locale says."""
    return set_language(os.environ.get(LANGUAGE_ENV) or language_from_env())


# A thread may speak another language for a while (in_language), e.g. a report written in English by a
# worker thread while the app's screens go on in Chinese.
_thread = threading.local()


@contextmanager
def in_language(language: str) -> Iterator[str]:
    """Inside the block, this thread's `_()` speaks `language`; other threads keep theirs."""
    previous = getattr(_thread, "chosen", None)
    _thread.chosen = _load(language)
    try:
        yield _thread.chosen[0]
    finally:
        _thread.chosen = previous


def _active() -> tuple[str, gettext.NullTranslations]:
    return getattr(_thread, "chosen", None) or (_language, _translations)


def current_language() -> str:
    return _active()[0]


def _(message: str) -> str:
    """The message in the current language; the English itself when it has no translation."""
    return _active()[1].gettext(message) if message else message


def ngettext(singular: str, plural: str, count: int) -> str:
    return _active()[1].ngettext(singular, plural, count)


def N_(message: str) -> str:
    """Marks a string for the catalogue without translating it now (module-level tables)."""
    return message


def retold(text: str, templates: tuple[str, ...], **say: Callable[[str], str]) -> str:
    """An English sentence kept in a record, made from one of `templates` (msgids with {fields}), in the
    language in force: the fields are read back from it, each said by `say[field]` when given.
    A sentence made from none of them is returned as it is."""
    for template in templates:
        found = re.fullmatch(_template_pattern(template), text, re.S)
        if found:
            fields = {name: say[name](value) if name in say else value for name, value in found.groupdict().items()}
            return _(template).format(**fields)
    return text


def _template_pattern(template: str) -> str:
    pieces = re.split(r"\{(\w+)\}", template)
    return "".join(re.escape(piece) if i % 2 == 0 else f"(?P<{piece}>.+?)" for i, piece in enumerate(pieces))


def cell_width(text: str) -> int:
    """The terminal cells `text` takes: two for a wide (CJK) character, none for a combining mark."""
    return sum(0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
               for ch in text)


def ljust_cells(text: str, width: int) -> str:
    """`text` padded to `width` cells: `format(text, "<10")` counts characters, so a translated heading
    would push its column out of line."""
    return text + " " * max(width - cell_width(text), 0)


def rjust_cells(text: str, width: int) -> str:
    return " " * max(width - cell_width(text), 0) + text


# A sentence ending in one of these needs no space before the next (Chinese sets none after 。).
FULL_WIDTH_ENDS = "。！？；：，）」"


def sentences(*parts: str) -> str:
    """Sentences one after another: a space after an English one, none after a Chinese one."""
    out = ""
    for part in filter(None, parts):
        out += part if not out or out[-1] in FULL_WIDTH_ENDS else " " + part
    return out
