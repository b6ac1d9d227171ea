"""Python's own report of a fatal signal in a rank's log: which error, where the crashing thread was,
and the user's line on that thread.

    Fatal Python error: Segmentation fault

    Thread 0x00007fb1affff6c0 (most recent call first):
      File "/usr/lib/python3.11/threading.py", line 982 in run
    Current thread 0x00007fb273a5ab80 (most recent call first):
      File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at
      File "/home/user/project/train.py", line 10 in read_native

    Extension modules: numpy._core._multiarray_umath, torch._C, … (total: 21)

faulthandler writes this when a process dies of SIGSEGV, SIGABRT, SIGBUS, SIGFPE or SIGILL: ranks
under `mgtutor run` have it on (the stack hook), any Python with PYTHONFAULTHANDLER=1 or -X
faulthandler. The crash itself happened in native code (C++, CUDA, a compiler), which has no Python
traceback; the innermost Python frame of the thread that crashed is the closest line to it. The
Scanner keeps each rank's first dump (its lines, bounded) and hang/stack_dumps.py's parse_dump reads it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mgtutor.diagnostics.failures.hang.stack_dumps import Frame, is_user_file, parse_dump
from mgtutor.diagnostics.failures.logs.logparse import LogLine
from mgtutor.training.foundation.i18n import _, sentences

FATAL_TRIGGERS = ("fatal python error",)  # lowercase: the block prefilter hands these lines over
_FATAL = re.compile(r"^Fatal Python error: (?P<error>\S.*?)\s*$")
_HEADER = re.compile(r"^(?:Current thread|Thread|Stack|Python runtime state)\b")
_END = "Extension modules:"  # faulthandler's last line, when any extension module was loaded
MAX_DUMP_LINES = 12_000  # faulthandler's own limits: 100 threads of 100 frames, and their headers
# the fatal errors of faulthandler's signals (anything else is Python's own Py_FatalError)
SIGNALS = {"Segmentation fault": "SIGSEGV", "Aborted": "SIGABRT", "Bus error": "SIGBUS",
           "Floating point exception": "SIGFPE", "Illegal instruction": "SIGILL"}
COMPILE_MARKERS = ("/torch/_dynamo/", "/torch/_inductor/", "/torch/_functorch/", "/torchinductor_", "/triton/")
_LIBRARY_ROOTS = re.compile(r".*/(?:site-packages|dist-packages|lib/python3\.\d+)/")
_PACKAGE = re.compile(r"/(?:site|dist)-packages/([^/]+)")
TRAINER_MARKER = "/training/worker/"  # `mgtutor train`'s own loop, which has --compile


@dataclass
class FatalDump:
    header: LogLine  # the "Fatal Python error: …" line
    lines: list[LogLine] = field(default_factory=list)  # the dump's lines after it

    @property
    def error(self) -> str:
        match = _FATAL.match(self.header.text)
        return match["error"] if match else self.header.text.strip()


class FatalDumps:
    """Each rank's first dump, read line by line as the Scanner feeds them."""

    def __init__(self) -> None:
        self.first: dict[int | None, FatalDump] = {}
        self._open: dict[tuple[str, int | None], FatalDump] = {}

    @property
    def open(self) -> bool:
        return bool(self._open)

    def feed(self, line: LogLine) -> None:
        key = (line.file, line.rank)
        if line.text.startswith("Fatal Python error: "):
            self._open.pop(key, None)
            if line.rank not in self.first:
                self.first[line.rank] = self._open[key] = FatalDump(line)
            return
        dump = self._open.get(key)
        if dump is None:
            return
        if not _in_dump(line.text) or len(dump.lines) >= MAX_DUMP_LINES:
            del self._open[key]  # the dump ended: what follows is the log again
            return
        dump.lines.append(line)
        if line.text.startswith(_END):
            del self._open[key]

    def of(self, rank: int | None) -> FatalDump | None:
        """The rank's own dump, else one no rank prefix names (a plain torchrun log)."""
        return self.first.get(rank) or self.first.get(None)


def _in_dump(text: str) -> bool:
    """faulthandler writes ASCII only: thread headers, indented frames, blank lines, the extension modules."""
    return text.isascii() and (text[:1] in ("", " ") or bool(_HEADER.match(text)) or text.startswith(_END))


@dataclass(frozen=True)
class CrashSite:
    error: str  # "Segmentation fault"
    signal: str | None  # SIGSEGV; None for Python's own fatal errors
    innermost: Frame | None  # the crashing thread's innermost Python frame
    mine: Frame | None  # the innermost frame in the user's code on that thread
    crashed_in_python_thread: bool  # False: a thread of native code only (NCCL, gloo, OpenMP) crashed
    in_compile: bool  # torch.compile's frames (Dynamo, Inductor, Triton) are on the crashing stack
    in_trainer: bool  # so are the built-in trainer's (`mgtutor train`)
    evidence: list[dict[str, Any]]


def crash_site(dump: FatalDump) -> CrashSite:
    threads = parse_dump("\n".join(_as_written(line.text) for line in dump.lines))
    crashed = next((t for t in threads if t.current), None)
    shown = crashed or next((t for t in threads if t.is_main), None)  # a native thread crashed: where main was
    frames = shown.frames if shown else []
    innermost = frames[0] if frames else None
    mine = next((f for f in frames if is_user_file(f.file)), None)
    evidence = [dump.header.evidence()] + [dump.lines[f.at].evidence() for f in _distinct(innermost, mine)
                                           if 0 <= f.at < len(dump.lines)]
    return CrashSite(dump.error, SIGNALS.get(dump.error), innermost, mine, crashed is not None,
                     any(m in f.file for f in frames for m in COMPILE_MARKERS),
                     any(TRAINER_MARKER in f.file for f in frames), evidence)


def _as_written(text: str) -> str:
    """faulthandler indents by two spaces; a rank prefix ("[default0]:") may have taken one of them."""
    return "  " + text.lstrip() if text[:1] == " " else text


def _distinct(innermost: Frame | None, mine: Frame | None) -> list[Frame]:
    if innermost is None:
        return []
    return [innermost] if mine in (None, innermost) else [innermost, mine]


def place(frame: Frame) -> str:
    """'train.py:40 in main'; a library's file keeps its package: 'torch/_inductor/graph.py:12 in run'."""
    inside = _LIBRARY_ROOTS.sub("", frame.file, count=1)
    where = inside if inside != frame.file else Path(frame.file).name
    return _("{file}:{line} in {function}").format(file=where, line=frame.line, function=frame.short_name)


def summary_text(site: CrashSite) -> str:
    """What follows "Rank 1 failed first (signal SIGSEGV)" in the child_failed summary."""
    said = _(", with \"Fatal Python error: {error}\" in its log").format(error=site.error[:200])
    if site.innermost is None:  # a thread with no frames, or no thread dumped at all
        return said + (_(", and no Python frame on the thread that crashed") if site.crashed_in_python_thread else "")
    where = place(site.innermost)
    mine = "" if site.mine in (None, site.innermost) else _(" (your code: {place})").format(place=place(site.mine))
    if not site.crashed_in_python_thread:
        return said + _(": the crash was in a thread that runs no Python; the main thread was at {place}{mine}").format(
            place=where, mine=mine)
    if site.signal is None:
        return said + _(": Python stopped at {place}{mine}").format(place=where, mine=mine)
    return said + _(": the crash came from native code called at {place}{mine}").format(place=where, mine=mine)


def fix_text(site: CrashSite, rank: int | str) -> str:
    read = _("faulthandler wrote every thread's Python stack into rank {rank}'s log (stderr), the thread that "
             "crashed as \"Current thread\".").format(rank=rank)
    if site.signal is None:
        return sentences(read, _("Python itself ended the process: read the lines just above the fatal error in "
                                 "that log."))
    if not site.crashed_in_python_thread or site.innermost is None:
        native = _("The crash was in native code with no Python of its own (NCCL, gloo, CUDA, OpenMP threads): "
                   "report it to that library with the log and the versions `mgtutor doctor` prints.")
        return sentences(read, _compile_step(site) or native)
    lead = _("Python has no traceback for a crash in native code (C++, CUDA, a compiled extension): the closest "
             "line is {place}, which called it.").format(place=place(site.innermost))
    return sentences(lead, read, _compile_step(site) or _next_step(site))


def _compile_step(site: CrashSite) -> str:
    if not site.in_compile:
        return ""
    if site.in_trainer:
        return _("It crashed while torch.compile was compiling or running the model: re-run `mgtutor train` with "
                 "`--compile off` to confirm, and report it to PyTorch with that stack and the versions `mgtutor "
                 "doctor` prints.")
    return _("It crashed while torch.compile was compiling or running the model: run once without "
             "torch.compile to confirm, and report it to PyTorch with that stack and the versions "
             "`mgtutor doctor` prints.")


def _next_step(site: CrashSite) -> str:
    package = _package(site.innermost) if site.innermost else None
    if package is not None or site.mine is None:
        return _("Report it to {package} with that stack and the versions `mgtutor doctor` prints; another version "
                 "of it may not crash.").format(package=package or _("the library that file belongs to"))
    return _("Look at what your code at {place} hands to native code (tensor shapes, devices, pointers, memory "
             "freed too early).").format(place=place(site.mine))


def _package(frame: Frame) -> str | None:
    """The installed package a frame's file belongs to: 'torch' for …/site-packages/torch/nn/….py."""
    match = _PACKAGE.search(frame.file)
    return match[1].removesuffix(".py") if match else None
