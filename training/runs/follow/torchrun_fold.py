"""torchrun's own Python tracebacks, folded to one line for the terminal and the Monitor.

When a rank fails or the run is stopped, torchrun ends with a 25-55 line traceback of its own
(`ChildFailedError` with its failure summary, `SignalException`, chained). A newcomer reads it as
a crash of mgtutor, and it says nothing the result line and the diagnosis do not. The file
torchrun.log keeps it whole; the line stream gets one line instead:

    torchrun reported the failure of rank 1 (exit code 3); its traceback (41 lines) is in torchrun.log

Only a block that is torchrun's (a frame or the exception in torch.distributed) is folded: any other
traceback in torchrun.log (say, of the rank wrapper) is passed on whole. A rank's own traceback is
in the rank's logs and never passes through here. Lines are folded as they stream: a block is held
until its end is seen (or `flush`).
"""
from __future__ import annotations

import re
from enum import Enum

from mgtutor.training.foundation.i18n import _
from mgtutor.training.runs.follow.tail import LineTuple

TRACEBACK = "Traceback (most recent call last):"
_CHAIN = ("During handling of the above exception", "The above exception was the direct cause")
_TORCH = ("torch/distributed/", "torch.distributed.", "torch\\distributed\\")
_EXCEPTION = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)|[A-Za-z_][\w.]*\.[A-Z]\w*)(?::\s?(.*))?$")
_ROOT_RANK = re.compile(r"^\s*rank\s*:\s*(\d+)")
_ROOT_EXIT = re.compile(r"^\s*exitcode\s*:\s*(-?\d+)(?:.*\((SIG\w+)\))?")
_GOT_SIGNAL = re.compile(r"got signal:\s*(\d+)")
MAX_BLOCK = 2000  # a block that never ends is passed on rather than held forever

_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}


class _State(Enum):
    OUTSIDE = 0
    FRAMES = 1  # inside "Traceback (most recent call last):", frames and their code
    AFTER = 2  # after an exception line: a chained traceback or a failure summary may follow
    SUMMARY = 3  # ChildFailedError's ===== summary =====


class TorchrunFolder:
    """Feed it torchrun's lines in order; it hands them back with torchrun's tracebacks folded."""

    def __init__(self) -> None:
        self.block: list[str] = []
        self.state = _State.OUTSIDE
        self.rules = 0  # "=====" lines seen in the summary

    def feed(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        for line in lines:
            out.extend(self._line(line))
        return out

    def flush(self) -> list[str]:
        """The held block, folded: call when the run is over and torchrun.log is read to its end."""
        return self._end()

    def _line(self, line: str) -> list[str]:
        bare = line.rstrip()
        if self.state is _State.OUTSIDE:
            if bare == TRACEBACK:
                self._start(line)
                return []
            return [line]
        if len(self.block) >= MAX_BLOCK:
            return self._end(whole=True) + self._line(line)
        if self.state is _State.FRAMES:
            self.block.append(line)
            if bare and not bare[0].isspace():  # the exception line ends the frames
                self.state = _State.AFTER
            return []
        if self.state is _State.SUMMARY:
            self.block.append(line)
            if bare.startswith("====="):
                self.rules += 1
                if self.rules >= 2:
                    return self._end()
            return []
        # AFTER: what follows the exception line decides whether the block goes on
        if not bare or bare.startswith(_CHAIN):
            self.block.append(line)
            return []
        if bare == TRACEBACK:
            self.block.append(line)
            self.state = _State.FRAMES
            return []
        if bare.startswith("=====") and self.rules == 0:
            self.block.append(line)
            self.state, self.rules = _State.SUMMARY, 1
            return []
        return self._end() + self._line(line)

    def _start(self, line: str) -> None:
        self.block, self.state, self.rules = [line], _State.FRAMES, 0

    def _end(self, whole: bool = False) -> list[str]:
        block, self.block, self.state, self.rules = self.block, [], _State.OUTSIDE, 0
        if not block:
            return []
        while len(block) > 1 and not block[-1].strip():
            block.pop()  # blank lines held after the exception belong to no one
        if whole or not any(marker in line for line in block for marker in _TORCH):
            return block
        return [fold_text(block)]


def fold_text(block: list[str]) -> str:
    """The one line that stands for torchrun's traceback `block`, in the language in force (torchrun.log
    keeps the traceback itself)."""
    where = _("its traceback ({count} lines) is in torchrun.log").format(count=len(block))
    rank = code = sig = None
    in_root = False
    for line in block:
        if line.startswith("Root Cause"):
            in_root = True
        elif in_root and rank is None and (match := _ROOT_RANK.match(line)):
            rank = match.group(1)
        elif in_root and code is None and (match := _ROOT_EXIT.match(line)):
            code, sig = match.group(1), match.group(2)
    if rank is not None:
        how = (_("signal {signal}").format(signal=sig) if sig else
               _("exit code {code}").format(code=code) if code is not None else _("see the log"))
        return _("torchrun reported the failure of rank {rank} ({how}); {where}").format(rank=rank, how=how, where=where)
    exceptions = [m for line in block if (m := _EXCEPTION.match(line.rstrip()))]
    last = exceptions[-1] if exceptions else None
    if last is not None and last.group(1).endswith("SignalException"):
        got = _GOT_SIGNAL.search(last.group(2) or "")
        num = int(got.group(1)) if got else None
        name = _SIGNALS.get(num or 0, _("signal {signal}").format(signal=num) if num else _("a signal"))
        return _("torchrun stopped on {signal}; {where}").format(signal=name, where=where)
    if last is not None:
        message = (last.group(2) or "").strip()
        name = last.group(1).rsplit(".", 1)[-1]
        raised = f"{name}: {message[:160]}" if message else name
        return _("torchrun raised {exception}; {where}").format(exception=raised, where=where)
    return _("torchrun printed a traceback; {where}").format(where=where)


class LineFolder:
    """The session's filter: torchrun's lines (rank None) through a TorchrunFolder, the rest untouched."""

    def __init__(self) -> None:
        self.torchrun = TorchrunFolder()

    def feed(self, lines: list[LineTuple]) -> list[LineTuple]:
        out: list[LineTuple] = []
        for rank, stream, text in lines:
            if rank is None:
                out.extend((None, stream, folded) for folded in self.torchrun.feed([text]))
            else:
                out.append((rank, stream, text))
        return out

    def flush(self) -> list[LineTuple]:
        return [(None, "torchrun", text) for text in self.torchrun.flush()]
