"""Tests of unreadable files need a process that permissions stop, and CI runs as root, which they
do not stop: `without_dac_override()` drops the two capabilities that let root past file modes
(CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH) from this thread's effective set for the block, and puts
them back after. Threads started inside the block (Textual's thread workers) inherit the dropped
set. As an ordinary user it does nothing: the modes already apply.
"""
from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager

_V3 = 0x20080522  # _LINUX_CAPABILITY_VERSION_3
_DAC_BITS = (1 << 1) | (1 << 2)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _get() -> tuple[_Header, ctypes.Array[_Data]]:
    header, data = _Header(_V3, 0), (_Data * 2)()
    if _libc().capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    return header, data


def _set(header: _Header, data: ctypes.Array[_Data]) -> None:
    if _libc().capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


@contextmanager
def without_dac_override() -> Iterator[None]:
    """File modes apply to this thread (and threads it starts) inside the block, also as root."""
    if os.geteuid() != 0:
        yield
        return
    header, data = _get()
    before = data[0].effective
    data[0].effective = before & ~_DAC_BITS
    _set(header, data)
    try:
        yield
    finally:
        header, data = _get()
        data[0].effective = before
        _set(header, data)


def modes_apply(path: str) -> bool:
    """Whether a mode-000 folder at `path` really stops this thread (a check the test is not vacuous)."""
    try:
        os.listdir(path)
    except PermissionError:
        return True
    return False
