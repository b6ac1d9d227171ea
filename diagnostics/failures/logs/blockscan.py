"""Feed a log file to a Scanner block by block: only the lines the prefilter points at are decoded.

The file is read in BLOCK-sized pieces that end at a line end, so memory stays bounded whatever
the file holds; a line longer than CHUNK is cut into CHUNK pieces that keep its line number, as
logparse.raw_lines does. Per block: terminal escapes go (colour codes could split a message), the
block is lowercased once for the prefilter, the rank prefixes at line starts are collected (so a
rank that printed only noise still counts toward the world size), and the lines with a trigger, or
every line while the scanner wants them all, go through logparse.lines_of, which cleans them as
for any other reader. Other control bytes are not removed from the whole block (that pass costs
more than the rest of the prefilter): one inside a message hides that line from the prefilter.
A block with escapes and a line longer than CHUNK is read line by line as raw_lines cuts it (cut
after cleaning, its pieces would end elsewhere). A piece of an over-long line is searched only in its first PIECE_HEAD bytes, which hold the first
MATCH_CHARS characters the scanner matches against (a 200 MB line of letters would otherwise stop
the trie regex at almost every byte).
"""
from __future__ import annotations

import bisect
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from mgtutor.diagnostics.failures.logs.logparse import CHUNK, lines_of, raw_lines
from mgtutor.diagnostics.failures.logs.scan import MATCH_CHARS, Scanner
from mgtutor.training.foundation.safe_io import open_regular

BLOCK = 1 << 20
PIECE_HEAD = 4 * MATCH_CHARS + 4096  # bytes that hold a piece's first MATCH_CHARS characters (and its rank prefix)
_ANSI = re.compile(rb"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
# a rank prefix at a line start, as logparse.split_prefix reads it (a stacked `[default1]:[rank1]:` names rank 1)
_LINE_RANK = re.compile(rb"\n\[(?:[A-Za-z_]+?\d+\]: ?\[)?(?:rank ?(\d+)\]|[A-Za-z_]+?(\d+)\]:)")


def blocks(handle: BinaryIO) -> Iterator[bytes]:
    """Whole lines, BLOCK bytes or so at a time; a line with no end within CHUNK bytes comes in pieces."""
    carry = b""
    while True:
        data = handle.read(BLOCK)
        if not data:
            if carry:
                yield carry
            return
        carry += data
        cut = carry.rfind(b"\n") + 1
        if cut:
            yield carry[:cut]
            carry = carry[cut:]
        while len(carry) >= CHUNK:
            yield carry[:CHUNK]
            carry = carry[CHUNK:]


def _clean(block: bytes) -> bytes:
    return _ANSI.sub(b"", block) if b"\x1b" in block else block


def _has_long_line(block: bytes) -> bool:
    if len(block) <= CHUNK:
        return False
    start = 0
    while (end := block.find(b"\n", start)) >= 0:
        if end - start > CHUNK:
            return True
        start = end + 1
    return len(block) - start > CHUNK


def _feed_every_piece(scanner: Scanner, raw: bytes, name: str, lineno: int, default_rank: int | None) -> None:
    for offset, piece in raw_lines(io.BytesIO(raw), CHUNK):
        for line in lines_of(piece, name, lineno + offset - 1, default_rank):
            scanner.feed(line)


def _note_ranks(scanner: Scanner, block: bytes) -> None:
    head = _LINE_RANK.findall(b"\n" + block[:200]) if block[:1] == b"[" else []  # the first line has no \n before it
    for by_rank, by_name in set(head + _LINE_RANK.findall(block)):
        scanner.note_rank(int(by_rank or by_name))


def scan_handle(scanner: Scanner, handle: BinaryIO, name: str, default_rank: int | None = None) -> None:
    lineno = 1  # 1 + line ends before `counted`
    any_text = False
    for raw in blocks(handle):
        block = _clean(raw)
        any_text = any_text or bool(block.strip())
        _note_ranks(scanner, block)
        if block is not raw and _has_long_line(raw):  # escapes gone, its pieces would be cut elsewhere than raw_lines cuts
            _feed_every_piece(scanner, raw, name, lineno, default_rank)
            lineno += raw.count(b"\n")
            continue
        if b"\n" in block or b"\r" in block:
            hits = scanner.prefilter.positions(block.lower())
        else:  # a piece of an over-long line: the scanner reads only its start (scan.MATCH_CHARS)
            hits = scanner.prefilter.positions(block[:PIECE_HEAD].lower())
        size = len(block)
        counted = pos = 0
        while pos < size:
            if scanner.wants_every_line:
                start = pos
            else:
                index = bisect.bisect_left(hits, pos)
                if index == len(hits):
                    break
                start = block.rfind(b"\n", pos, hits[index]) + 1 or pos
            end = block.find(b"\n", start)
            end = size if end < 0 else end
            lineno += block.count(b"\n", counted, start)
            counted = start
            for piece in range(start, max(end, start + 1), CHUNK):
                for line in lines_of(block[piece:min(piece + CHUNK, end)], name, lineno, default_rank):
                    scanner.feed(line)
            pos = end + 1
        lineno += block.count(b"\n", counted, size)
    if any_text:
        scanner.note_rank(default_rank)


def scan_file(scanner: Scanner, path: str | Path, name: str | None = None, default_rank: int | None = None) -> None:
    """Raises OSError only when the file cannot be opened."""
    with open_regular(path) as handle:
        scan_handle(scanner, handle, name or str(path), default_rank)
