"""The Chinese catalogue: every message the code marks has a translation that keeps its placeholders,
the shipped .mo says what the .po says, and the language comes from the locale, the setting or --lang."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.mofile import read_mo
from babel.messages.pofile import read_po

from mgtutor.lessons.loader import get_lesson
from mgtutor.lessons.progress import Progress, start_language
from mgtutor.training.foundation import i18n
from mgtutor.training.foundation.i18n import _, current_language, language_from_env, ngettext, normalize, set_language
from tests.conftest import REPO

PO = REPO / "training/foundation/locale/zh/LC_MESSAGES/mgtutor.po"
MO = PO.with_suffix(".mo")
# {rank}, {name!r}, {value:.1f}, %s, %d, %(name)s, %.1f: what str.format and % fill in.
PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_.]*(?:![rsa])?(?::[^{}]*)?\}|%(?:\([A-Za-z_]+\))?[-+ #0]*\d*(?:\.\d+)?[sdifgr%]")


def catalogue():
    with PO.open("rb") as po:
        return read_po(po)


def extracted_msgids() -> set[str]:
    with (REPO / "babel.cfg").open() as cfg:
        method_map, options_map = parse_mapping_cfg(cfg)
    found = set()
    for _filename, _lineno, message, _comments, _context in extract_from_dir(str(REPO), method_map, options_map):
        found.add(message if isinstance(message, str) else message[0])
    return found


def placeholders(text: str) -> list[str]:
    return sorted(PLACEHOLDER.findall(text))


def singular(message) -> str:
    """The msgid of a message; for a plural one (ngettext), its singular, as extraction reports it."""
    return message.id if isinstance(message.id, str) else message.id[0]


def forms(message) -> tuple[str, ...]:
    """The translation, as a tuple of its forms (one for a plain message; Chinese has one plural form)."""
    return (message.string,) if isinstance(message.string, str) else tuple(message.string)


def test_every_marked_string_is_in_the_catalogue_with_a_translation():
    """The switch that keeps the catalogue whole: a string wrapped in _() or N_() anywhere, or a
    user-facing field of lesson.json, fails here until its Chinese is in the .po."""
    translated = {singular(m): all(forms(m)) for m in catalogue() if m.id and not m.fuzzy}
    missing = sorted(mid for mid in extracted_msgids() if not translated.get(mid))
    assert not missing, f"{len(missing)} message(s) without a zh translation (docs/architecture.md, " \
                        f"Translations): {missing[:10]}"


def test_no_translation_drops_or_adds_a_placeholder():
    broken = [(m.id, m.string) for m in catalogue()
              if m.id and any(placeholders(singular(m)) != placeholders(form) for form in forms(m))]
    assert not broken, broken[:5]


def test_the_placeholder_check_sees_what_format_fills_in():
    assert placeholders("rank {rank} waited {seconds:.0f} s for %s (%(n)d)") == \
        sorted(["{rank}", "{seconds:.0f}", "%s", "%(n)d"])
    assert placeholders("{rank} 等了 {seconds:.0f} 秒") != placeholders("rank {rank} waited {seconds:.0f} s for %s")


def test_the_shipped_mo_says_what_the_po_says():
    """The .mo is compiled from the .po (pybabel compile) and committed: a .po edited without
    recompiling would ship the old words."""
    with MO.open("rb") as mo:
        shipped = {singular(m): forms(m) for m in read_mo(mo) if m.id}
    source = {singular(m): forms(m) for m in catalogue() if m.id and not m.fuzzy and all(forms(m))}
    assert shipped == source


def test_no_message_is_translated_in_a_way_that_hides_a_fuzzy_guess():
    assert not [m.id for m in catalogue() if m.id and m.fuzzy]


@pytest.mark.parametrize(("environ", "language"), [
    ({"LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LC_ALL": "zh_SG.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
    ({"LANGUAGE": "zh_Hans:en", "LANG": "C.UTF-8"}, "zh"),
    ({"LC_MESSAGES": "zh-Hans-CN", "LANG": "en_GB.UTF-8"}, "zh"),
    ({"LANGUAGE": "fr:de", "LC_ALL": "zh_CN.UTF-8"}, "zh"),  # no language of LANGUAGE is ours: the next one
    ({"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, "en"),  # LC_ALL wins over LANG
    ({"LANG": "zh_TW.UTF-8"}, "en"),                           # Traditional is not Simplified Chinese
    ({"LANG": "C"}, "en"),
    ({}, None),
])
def test_the_locale_variables_pick_the_language_as_gettext_does(environ, language):
    assert language_from_env(environ) == language


def test_tags_normalise_to_our_two_languages():
    assert [normalize(tag) for tag in ("zh", "zh_CN.UTF-8", "zh-Hans", "zh_SG", "en", "POSIX", "ja_JP")] == \
        ["zh", "zh", "zh", "zh", "en", "en", None]


def test_switching_changes_every_later_message_and_english_is_the_fallback():
    assert _("print the version and exit") == "print the version and exit"
    assert set_language("zh_CN.UTF-8") == "zh" == current_language()
    assert _("print the version and exit") == "打印版本号并退出"
    assert _("a message nobody translated") == "a message nobody translated"
    assert _("") == ""  # never the catalogue's header
    assert ngettext("{n} rank", "{n} ranks", 2) == "{n} ranks"  # untranslated plural falls back to English
    assert set_language("en") == "en"
    assert _("print the version and exit") == "print the version and exit"


def test_a_missing_catalogue_leaves_english(monkeypatch, tmp_path):
    monkeypatch.setattr(i18n, "LOCALE_DIR", tmp_path)
    assert set_language("zh") == "en"
    assert _("print the version and exit") == "print the version and exit"


def test_the_flag_beats_the_kept_setting_which_beats_the_locale():
    assert start_language(None, {"LANG": "zh_CN.UTF-8"}) == "zh"
    Progress().set_language("en")
    assert start_language(None, {"LANG": "zh_CN.UTF-8"}) == "en"
    assert start_language("zh", {"LANG": "en_US.UTF-8"}) == "zh"
    assert Progress().language == "en"  # --lang is for this command; the kept choice stays
    with pytest.raises(ValueError):
        Progress().set_language("fr")


def test_lessons_load_in_the_language_in_force():
    set_language("zh")
    lesson = get_lesson("04")
    assert lesson.title == "用 torchrun 跑 DDP"
    assert lesson.steps[0].checks[0].says == "每个 rank 都运行到了最后"
    assert lesson.explanation().startswith("# 用 torchrun 跑 DDP")
    set_language("en")
    lesson = get_lesson("04")
    assert lesson.title == "DDP with torchrun"
    assert lesson.explanation().startswith("# DDP with torchrun")


def test_the_json_extractor_takes_only_the_fields_a_person_reads():
    from mgtutor.training.foundation.i18n_extract import extract_json

    data = b'{"id": "x", "title": "A title", "steps": [{"name": "s", "checks": [{"kind": "exit_ok", ' \
           b'"key": "k", "says": "it ran"}]}], "exercise": {"task": "Fix it", "hints": ["one", "two"]}}'
    messages = [message for _line, _func, message, _comments in extract_json(io.BytesIO(data), None, None, None)]
    assert messages == ["A title", "it ran", "Fix it", "one", "two"]


def test_a_json_file_can_name_its_own_fields_in_babel_cfg():
    """check's rules.json says its texts under title, why and fix (babel.cfg: keys = title why fix);
    `why` is no field elsewhere (lesson 15's checks name a record's key with it)."""
    from mgtutor.training.foundation.i18n_extract import extract_json

    data = b'{"rules": [{"id": "r", "title": "T", "why": "W", "fix": "F", "before": "b", "find": "m.f"}]}'
    said = [message for _line, _func, message, _comments in extract_json(io.BytesIO(data), None, None,
                                                                        {"keys": "title why fix"})]
    assert said == ["T", "W", "F"]
    assert [m for _l, _f, m, _c in extract_json(io.BytesIO(data), None, None, {})] == ["T", "F"]


def test_every_check_rule_text_is_extracted_from_rules_json():
    from mgtutor.diagnostics.check.rules import RULES

    from mgtutor.training.foundation.i18n_extract import extract_json

    with (REPO / "babel.cfg").open() as cfg:
        method_map, options_map = parse_mapping_cfg(cfg)
    where = "diagnostics/check/rules.json"
    assert dict(method_map)[where].endswith(".extract_json")
    with (REPO / where).open("rb") as data:
        from_json = {message for _line, _func, message, _comments in extract_json(data, None, None, options_map[where])}
    assert from_json == {text for rule in RULES for text in (rule.title, rule.why, rule.fix)}


def test_the_catalogue_ships_in_the_package():
    pyproject = (REPO / "pyproject.toml").read_text()
    assert '"locale/*/LC_MESSAGES/*.mo"' in pyproject
    assert Path(i18n.__file__).with_name("locale") == MO.parent.parent.parent


@pytest.mark.parametrize("language", ["en", "zh"])
def test_a_gpu_skip_says_nvidia_gpu_in_every_language(language):
    """Progress tells a step skipped for want of a GPU by GPU_SKIP in its reason, whatever language
    the reason was saved in: a lesson done on CPU in Chinese stays done in English."""
    from mgtutor.lessons.progress import GPU_SKIP, passed_without_gpus
    from mgtutor.lessons.runner import skip_reason

    set_language(language)
    gpu_step = get_lesson("01").steps[1]
    reasons = [skip_reason(gpu_step, gpus=0), skip_reason(gpu_step, backend="gloo", gpus=2)]
    assert all(reason and GPU_SKIP in reason for reason in reasons), reasons
    assert passed_without_gpus([{"status": "passed"}, {"status": "skipped", "reason": reasons[0]}])


def test_the_hang_report_reads_in_chinese_and_is_kept_in_english():
    """The report a reader sees follows the language; what is saved with the stacks (to_dict) and
    printed by --json stays the English contract."""
    from mgtutor.diagnostics.failures.hang.analyse import analyse_capture

    capture = REPO / "tests/data/hang/slow-loader-auto"
    english = analyse_capture(capture, world_size=2)
    set_language("zh")
    chinese = analyse_capture(capture, world_size=2)
    text = chinese.text()
    assert text.startswith("卡住报告 (有 rank 不在集合通信里)："), text  # the kind's title, not its id
    assert "在其他 rank 加入之前，等待的 rank 无法继续" in text and "解决：找出" in text
    assert chinese.to_dict() == english.to_dict()
    assert "the waiting ranks cannot go on" in chinese.to_dict()["summary"]


def test_sentences_are_spaced_in_english_and_not_after_chinese_punctuation():
    from mgtutor.training.foundation.i18n import sentences

    assert sentences("It failed.", "", "Fix it.") == "It failed. Fix it."
    assert sentences("运行失败。", "PyTorch 没有找到 GPU。") == "运行失败。PyTorch 没有找到 GPU。"
    assert sentences("", "只有一句") == "只有一句"


def test_a_thread_can_speak_english_while_the_others_go_on_in_chinese():
    import threading

    from mgtutor.training.foundation.i18n import in_language

    set_language("zh")
    seen = {}

    def worker():
        with in_language("en") as language:
            seen["inside"] = (language, current_language(), _("print the version and exit"))
            started.set()
            done.wait(5)
        seen["after"] = _("print the version and exit")

    started, done = threading.Event(), threading.Event()
    thread = threading.Thread(target=worker)
    thread.start()
    assert started.wait(5)
    assert _("print the version and exit") == "打印版本号并退出"  # this thread, while the other is in English
    done.set()
    thread.join(5)
    assert seen == {"inside": ("en", "en", "print the version and exit"), "after": "打印版本号并退出"}
