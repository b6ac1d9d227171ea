"""A full state disk must never end the user's training, and must never end mgtutor in a traceback.

The run directory lives on the state disk, and the ranks' logs can fill it. Then:
- the ranks' output goes through their wrappers (pump.py), which drop what does not fit and count it;
- the records written at the end (the rank files, result.json, meta.json) are first written whole
  beside the file and renamed, as always; when that finds no space, the file is overwritten where it
  is (its blocks are there already), or written into space the launcher set aside for it (`reserve`);
- `launch` refuses to start when the disk cannot hold a run record at all, and says so when it is low.
"""
from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

from mgtutor.training.foundation.i18n import _
from mgtutor.training.foundation.safe_io import open_private
from mgtutor.training.runs.records.record import RunRecord, read_json, write_json_atomic

MIB = 1 << 20
MIN_FREE = 2 * MIB  # less, and not even a run record fits: launch refuses
LOW_FREE = 256 * MIB  # less, and a talkative run may fill it: launch warns
NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
RESERVED = ".{name}.reserved"
DROPPED_KEY = "output_dropped"  # in a rank file's and result.json's extra fields


def free_bytes(folder: Path) -> int | None:
    """Bytes an unprivileged writer may still use on the file system that holds `folder` (or the
    nearest folder above it that exists), None when that cannot be told."""
    for place in (folder, *folder.parents):
        try:
            stats = os.statvfs(place)
        except FileNotFoundError:
            continue
        except OSError:
            return None
        return stats.f_bavail * stats.f_frsize
    return None


def space_problem(folder: Path) -> tuple[str | None, str | None]:
    """(why no run can start, None) when the disk is all but full; (None, a warning) when it is low;
    (None, None) when there is room or it cannot be told."""
    free = free_bytes(folder)
    if free is None or free >= LOW_FREE:
        return None, None
    said = {"free": _mib(free), "folder": folder}
    if free < MIN_FREE:
        return _("only {free} MiB left on the disk of {folder}: not even the run record fits; free some space, "
                 "or point XDG_STATE_HOME at a disk with room").format(**said), None
    return None, _("only {free} MiB left on the disk of {folder}: once it is full the ranks' output is dropped "
                   "(the training goes on, the run says how much was lost)").format(**said)


def os_error_words(exc: OSError) -> str:
    """"No space left on device (/path)": the reason, and the file when the reason does not name it."""
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) not in (exc.strerror or "") else ""
    return f"{exc.strerror or exc}{where}"


def _mib(size: int) -> str:
    return f"{size / MIB:.1f}"


def _size(size: int) -> str:
    return f"{size / MIB:.1f} MiB" if size >= MIB else f"{size / 1024:.1f} KiB" if size >= 1024 else f"{size} B"


def reserve(path: Path, size: int) -> None:
    """Set `size` bytes aside (a hidden file beside `path`) for writing `path` once the disk is full;
    nothing when even that does not fit."""
    try:
        fd = open_private(path.with_name(RESERVED.format(name=path.name)))
    except OSError:
        return
    try:
        os.write(fd, b" " * size)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json_anyway(path: Path, data: Any) -> bool:
    """Write a record file whatever the disk's state: whole and renamed into place (readers never see
    half of it), or, on a full disk, over the file itself or into its reserve. False when it could not
    be written at all; never an exception."""
    reserved = path.with_name(RESERVED.format(name=path.name))
    try:
        write_json_atomic(path, data)
    except OSError as exc:
        if exc.errno not in NO_SPACE:
            return False
    else:
        try:  # the file's own blocks are there now: a later write on a full disk goes over them
            os.unlink(reserved)
        except OSError:
            pass
        return True
    payload = (json.dumps(data, indent=2, sort_keys=True) + "\n").encode()
    for target in (reserved, path):
        if _overwrite(target, payload):
            if target == reserved:
                try:
                    os.replace(reserved, path)
                except OSError:
                    return False
            return True
    return False


def update_meta_anyway(record: RunRecord, **fields: Any) -> bool:
    """RunRecord.update_meta that a full disk cannot turn into a traceback (write_json_anyway)."""
    data = read_json(record.path / "meta.json")
    return write_json_anyway(record.path / "meta.json", {**(data if isinstance(data, dict) else {}), **fields})


def _overwrite(path: Path, payload: bytes) -> bool:
    """Write `payload` over an existing file's own blocks (no new file, never through a symlink)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        info = os.fstat(fd)
        if max(info.st_size, info.st_blocks * 512) < len(payload):
            return False  # it would need blocks the disk does not have
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
        os.ftruncate(fd, len(payload))
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _rank_order(item: tuple[Any, int]) -> tuple[int, str]:
    return (int(item[0]), "") if str(item[0]).isdigit() else (1 << 31, str(item[0]))


def dropped_note(dropped: Any) -> str | None:
    """One line saying how much of which ranks' output was lost ({rank: {"stdout": bytes, "stderr": bytes,
    "why": text}} as result.json keeps it), or None when nothing was (or the record says nonsense)."""
    if not isinstance(dropped, dict):
        return None
    sizes = {rank: sum(v for v in lost.values() if isinstance(v, int) and not isinstance(v, bool))
             for rank, lost in dropped.items() if isinstance(lost, dict)}
    sizes = {rank: size for rank, size in sizes.items() if size > 0}
    if not sizes:
        return None
    why = next((lost.get("why") for lost in dropped.values() if isinstance(lost, dict) and lost.get("why")), None)
    ranks = ", ".join(f"{rank} ({_size(size)})" for rank, size in sorted(sizes.items(), key=_rank_order))
    return _("output of rank(s) {ranks} was not written to their logs ({why}): the training went on, "
             "that output is lost").format(ranks=ranks, why=why if isinstance(why, str) else _("a write failed"))
