"""Reading and writing mgtutor's own files so that nothing found on disk can hang, crash or misdirect it.

A run directory is read by every command and the TUI, and anything can end up in it: a FIFO where a
log should be (opening it blocks until a writer comes), a device, a directory, a symlink to someone
else's file, a folder that another user (or root) owns with mode 000. Readers here open without
blocking and accept only regular files; writers create files 0600 in folders 0700 and never follow
a symlink, so a planted link cannot make mgtutor write (or chmod) a file elsewhere.
"""
from __future__ import annotations

import errno
import fnmatch
import os
import stat
from pathlib import Path
from typing import BinaryIO

from mgtutor.training.foundation.i18n import N_

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)


class NotARegularFile(OSError):
    """A path that exists but is no regular file (a FIFO, device, directory, socket)."""


class UnsafePath(OSError):
    """A path mgtutor will not write through: a symlink, or something other than a folder."""


def kind_of(mode: int) -> str:
    """What a file type is, in English words (said with `_()` where shown): "a FIFO (named pipe)", …"""
    for test, words in ((stat.S_ISDIR, N_("a directory")), (stat.S_ISFIFO, N_("a FIFO (named pipe)")),
                        (stat.S_ISCHR, N_("a character device")), (stat.S_ISBLK, N_("a block device")),
                        (stat.S_ISSOCK, N_("a socket")), (stat.S_ISLNK, N_("a symlink"))):
        if test(mode):
            return words
    return N_("not a regular file")


def path_kind(path: str | os.PathLike[str]) -> str | None:
    """None for a regular file (or a symlink to one); else what it is: "missing", "a FIFO (named pipe)", …"""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    return None if stat.S_ISREG(mode) else kind_of(mode)


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """The file opened for reading in binary, or NotARegularFile: a FIFO or device is never opened
    in a way that waits (O_NONBLOCK), and is refused as soon as fstat says what it is."""
    fd = os.open(path, _READ_FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(errno.EINVAL, f"{Path(path).name} is {kind_of(mode)}, not a file", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """The bytes of a regular file (at most `limit`), or OSError (NotARegularFile for a FIFO, …)."""
    with open_regular(path) as handle:
        return handle.read() if limit is None else handle.read(limit)


def read_text_regular(path: str | os.PathLike[str], errors: str = "replace") -> str:
    return read_regular(path).decode("utf-8", errors)


def entries(folder: Path, pattern: str = "*") -> list[Path]:
    """The names in `folder` that match `pattern`, sorted; none when it is missing or unreadable
    (Path.glob raises PermissionError on a mode-000 folder)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return [folder / name for name in sorted(fnmatch.filter(names, pattern))]


def private_dir(path: Path) -> Path:
    """`path` as a folder of mode 0700, made (with its missing parents, 0700 too) when absent.
    A symlink or a non-folder in its place is refused with UnsafePath, which says what it is."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        if path.parent != path:
            parent_mode = _lstat_mode(path.parent)
            if parent_mode is None:
                private_dir(path.parent)
        try:
            os.mkdir(path, PRIVATE_DIR)
            os.chmod(path, PRIVATE_DIR)  # mkdir's mode is masked by the umask
        except FileExistsError:
            pass
        mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        raise UnsafePath(errno.ELOOP, f"{path} is a symlink; mgtutor keeps its files only in a real folder "
                                      "(remove the link, or point XDG_STATE_HOME elsewhere)", str(path))
    if not stat.S_ISDIR(mode):
        raise UnsafePath(errno.ENOTDIR, f"{path} is {kind_of(mode)}, not a folder; move it away "
                                        "(or point XDG_STATE_HOME elsewhere)", str(path))
    if stat.S_IMODE(mode) & 0o077 and os.stat(path).st_uid == os.geteuid():
        os.chmod(path, stat.S_IMODE(mode) & PRIVATE_DIR)  # an old 0755 one is closed to others; nothing is opened
    return path


def _lstat_mode(path: Path) -> int | None:
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return None


def open_private(path: Path, append: bool = False, exclusive: bool = False) -> int:
    """A file descriptor for writing `path`, mode 0600, never through a symlink (O_NOFOLLOW):
    appended to with `append`, else truncated; `exclusive`: FileExistsError if it exists."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    flags |= os.O_APPEND if append else 0
    flags |= os.O_EXCL if exclusive else 0
    try:
        fd = os.open(path, flags, PRIVATE_FILE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(errno.ELOOP, f"{path} is a symlink; mgtutor does not write through it",
                             str(path)) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotARegularFile(errno.EINVAL, f"{path} is {kind_of(info.st_mode)}, not a file", str(path))
        os.set_blocking(fd, True)
        if not append and not exclusive:
            os.ftruncate(fd, 0)
        if stat.S_IMODE(info.st_mode) != PRIVATE_FILE:
            os.fchmod(fd, PRIVATE_FILE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_private_atomic(path: Path, data: bytes | str) -> None:
    """Readers never see half a file: a new 0600 file beside it, then renamed over it (a symlink
    at `path` is replaced, never followed)."""
    _replace_atomically(path, data.encode("utf-8") if isinstance(data, str) else data, PRIVATE_FILE)


def _replace_atomically(path: Path, payload: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        os.unlink(tmp)  # a leftover of a crashed writer with this pid
    except FileNotFoundError:
        pass
    if mode == PRIVATE_FILE:
        fd = open_private(tmp, exclusive=True)
    else:  # a job file (0755, 0644): the mode less the umask, like any new file
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


STDOUT_NAMES = ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")
_MAGIC_LINKS = ("/proc/", "/dev/fd/")  # a link through these names an open file, not a place to put one


def write_output(output: str | os.PathLike[str], data: bytes | str, mode: int = PRIVATE_FILE,
                 replace: bool = True) -> Path | None:
    """Write a file the user named (`-o FILE`), for every command alike. `-` (or /dev/stdout) is
    standard output (None is returned). A regular file, or a new name, is written atomically: a new
    file beside it renamed over it (a symlink to a file is replaced, never followed). Anything else is
    never replaced by a rename: a character device (/dev/null, a terminal) or a FIFO with a reader is
    opened and written in place; a folder, block device, socket or a FIFO nobody reads is refused
    (NotARegularFile, which says what it is). `replace=False`: an existing file is FileExistsError."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    if os.fspath(output) in STDOUT_NAMES:
        _write_stdout(payload)
        return None
    path = Path(output)
    try:
        info: os.stat_result | None = os.lstat(path)
    except FileNotFoundError:
        info = None
    if info is not None and stat.S_ISLNK(info.st_mode):
        if _through_magic_link(path):
            _write_in_place(path, payload)  # /dev/stderr, /dev/fd/3: an open file of this process
            return path
        try:
            info = os.stat(path)  # where it points decides: a device is written, a file replaced
        except OSError:
            info = None  # a dangling link: replaced
        if info is not None and not stat.S_ISREG(info.st_mode):
            _write_in_place(path, payload)
            return path
        if not replace:
            raise FileExistsError(errno.EEXIST, "a symlink is there already", str(path))
    elif info is not None and not stat.S_ISREG(info.st_mode):
        _write_in_place(path, payload)
        return path
    elif info is not None and not replace:
        raise FileExistsError(errno.EEXIST, "a file is there already", str(path))
    if replace:
        _replace_atomically(path, payload, mode)
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
    return path


def _write_stdout(payload: bytes) -> None:
    import sys  # noqa: PLC0415 - only the `-o -` path needs it

    sys.stdout.flush()
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is not None:
        buffer.write(payload)
        buffer.flush()
    else:
        sys.stdout.write(payload.decode("utf-8", "replace"))
        sys.stdout.flush()


def _through_magic_link(path: Path) -> bool:
    """Whether following `path` goes through /proc (a process's open file): renaming over such a
    link (/dev/stderr) would replace the system's link, not write the file it stands for."""
    seen = 0
    current = os.fspath(path)
    while seen < 40:
        try:
            target = os.readlink(current)
        except OSError:
            return False
        if not target.startswith("/"):
            target = os.path.join(os.path.dirname(current), target)
        if target.startswith(_MAGIC_LINKS):
            return True
        current, seen = target, seen + 1
    return False


def _write_in_place(path: Path, payload: bytes) -> None:
    """Open what is there (no create, no truncate) and write to it: a device, a FIFO with a reader."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a FIFO with no reader (opening it would wait), or a socket
            kind = path_kind(path) or "a file"
            raise NotARegularFile(errno.ENXIO, f"{path} is {kind} that nobody reads; give a file name",
                                  str(path)) from None
        if exc.errno == errno.EISDIR:
            raise NotARegularFile(errno.EISDIR, f"{path} is a directory; give a file name", str(path)) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
            raise NotARegularFile(errno.EINVAL, f"{path} is {kind_of(mode)}; give a file name", str(path))
        os.set_blocking(fd, True)
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)
