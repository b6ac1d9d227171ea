"""mgtutor's stack hook: the launcher puts this directory first on the ranks' PYTHONPATH.

Why: where py-spy may not attach (no ptrace rights, e.g. a container without SYS_PTRACE), mgtutor
still needs each rank's Python stack while it hangs. `faulthandler` can dump every thread from a
C-level signal handler even while the main thread is blocked inside a collective, so every process
of a rank (`__main__`, spawn children, DataLoader workers) registers one signal that appends its
stacks to `<run>/stacks/live/pid<PID>.txt`. The user's script runs unchanged; any sitecustomize
that was on the path before this one is still imported afterwards.

Only processes with RANK in their environment (torchrun's workers and their children) take part.

The same hook serves Flight Recorder dumps where torch has no way to ask from outside (gloo: NCCL
has its own dump pipe): a daemon thread blocks on a FIFO `<live>/fr_pid<PID>.pipe` and, when a byte
arrives, writes torch's own dump (`_dump_fr_trace`) to TORCH_FR_DUMP_TEMP_FILE + rank. It costs
nothing until asked: the thread sleeps in read(). Forked DataLoader workers get no thread.

At exit it collects garbage once, before Python finalizes (`_collect_before_exit` says why).

A rank that dies of a fatal signal in native code (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL: a crash
in a C++ extension, a CUDA library, a compiler) leaves no Python traceback, so the hook also turns on
faulthandler's fatal-error handler: it writes "Fatal Python error: Segmentation fault" and every
thread's Python stack into the rank's stderr, then lets the signal end the process as before (the
exit code stays -11). It costs nothing until such a signal.

It also measures a user's script (`mgtutor run`, unless --no-instrument: MGTUTOR_INSTRUMENT=1): this file
never imports torch; a meta path finder waits for the script's own `import torch`, and when torch's
module has run, it imports the worker that hooks torch's optimizer steps, DataLoader and backward
(training/worker/rank_hook.py, which says what it measures and when it reads values). Why a finder: it
is asked only for a module not imported yet, and it takes itself out of `sys.meta_path` at torch's
import, so the script's imports cost nothing more after that (a wrapped `builtins.__import__` would
run at every import statement, also those inside hot functions; an audit hook fires before the import,
not after it, and cannot be removed; a thread polling `sys.modules` races the script's first step).
A script that never imports torch is never touched. Any failure is one line on stderr, never the
script's failure.
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # nothing more is imported at start-up
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType


def _signal_number() -> int | None:
    import signal

    rtmin = getattr(signal, "SIGRTMIN", None)
    chosen = os.environ.get("MGTUTOR_STACK_SIGNAL")
    if chosen and chosen.isdigit():
        return int(chosen)
    return int(rtmin) + 5 if rtmin is not None else int(getattr(signal, "SIGUSR2", 0)) or None


def _dump_flight_recorder() -> None:
    c10d = sys.modules.get("torch._C._distributed_c10d")
    prefix = os.environ.get("TORCH_FR_DUMP_TEMP_FILE") or os.environ.get("TORCH_NCCL_DEBUG_INFO_TEMP_FILE")
    if c10d is None or not prefix or not hasattr(c10d, "_dump_fr_trace"):
        return
    target = f"{prefix}{os.environ.get('RANK', '0')}"
    data = c10d._dump_fr_trace(includeStackTraces=False)  # symbolizing call sites takes seconds; stacks have lines
    tmp = f"{target}.{os.getpid()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    with open(os.open(tmp, flags, 0o600), "wb") as handle:  # 0600, never through a planted link
        handle.write(data)
    os.replace(tmp, target)


def _start_flight_listener(live: str, signum: int) -> None:
    import signal
    import threading

    path = os.path.join(live, f"fr_pid{os.getpid()}.pipe")
    try:
        if os.path.exists(path):
            os.unlink(path)
        os.mkfifo(path, 0o600)
        fd = os.open(path, os.O_RDWR)  # read-write: the read never sees end-of-file, it just waits
    except OSError:
        return
    import atexit

    atexit.register(_unlink, path)  # a rank killed outright leaves it: the supervisor sweeps those

    def serve() -> None:
        while True:
            try:
                if not os.read(fd, 64):
                    return
            except OSError:
                return
            try:
                _dump_flight_recorder()
            except Exception:  # a failed dump must never disturb the rank
                pass

    # The thread is born with stack requests blocked: they are the main thread's. Linux hands a process's signal
    # to another thread when the main one is off the CPU with one pending, and faulthandler, run in this thread,
    # can read the main thread's frames while it frees them at exit (a finished process died of SIGSEGV so, once).
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signum})
    try:
        threading.Thread(target=serve, name="mgtutor-fr-dump", daemon=True).start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _collect_before_exit() -> None:
    """Free now what only Python's last garbage collection would: a DDP model caught in a reference
    cycle keeps its process group alive, and when that collection tears the group down, its gloo
    threads touch Python objects while the interpreter is finalizing and abort the process
    ("terminate called without an active exception", pytorch#190489). Exit handlers run while the
    interpreter is still whole."""
    import gc

    gc.collect()


def _ignore_late_dumps(signum: int) -> None:
    """A stack request that arrives while the interpreter shuts down (faulthandler's handler already gone)
    would end the process by the signal's default action: from here on it is ignored."""
    import signal

    try:
        signal.signal(signum, signal.SIG_IGN)
    except (OSError, RuntimeError, ValueError):
        pass


def _enable_fatal_dumps() -> None:
    """faulthandler on fatal signals, unless PYTHONFAULTHANDLER or -X faulthandler turned it on already
    (then it writes where the user asked)."""
    import faulthandler

    if faulthandler.is_enabled():
        return
    try:
        faulthandler.enable(file=sys.stderr, all_threads=True)
    except (AttributeError, OSError, RuntimeError, ValueError):  # no usable stderr (None, or without a descriptor)
        pass


def _install(forked: bool = False) -> None:
    live = os.environ.get("MGTUTOR_STACKS_LIVE")
    signum = _signal_number()
    if not live or "RANK" not in os.environ or signum is None:
        return
    import faulthandler

    if not forked:
        _enable_fatal_dumps()
    # A forked worker needs nothing more: fork copies faulthandler's handlers and the stderr descriptor
    # they write to. A DataLoader worker then puts torch's own SIGSEGV/SIGBUS/SIGFPE handlers in their
    # place, and the main process raises "DataLoader worker ... is killed by signal", which says enough.
    try:
        old_umask = os.umask(0o077)  # every folder it makes is 0700, the parents too
        try:
            os.makedirs(live, exist_ok=True)
        finally:
            os.umask(old_umask)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        # A capture signals only a process whose live file exists, and the signal's default action ends the
        # process: the file gets its name only once the handler is in place (a slow start was killed so).
        opening = os.path.join(live, f".pid{os.getpid()}.opening")
        handle = open(os.open(opening, flags, 0o600), "a", buffering=1)
    except OSError:
        return  # no stacks for this process; the capture says the live file is missing
    if not forked:  # a forked worker leaves by os._exit: no exit handlers run there
        import atexit

        atexit.register(_ignore_late_dumps, signum)  # the first registered runs last, after the script's own
        atexit.register(_collect_before_exit)
    handle.write(f"# pid {os.getpid()} ppid {os.getppid()}\n")
    # faulthandler, when Python finalizes, puts back the handler it found here, over the SIG_IGN of
    # _ignore_late_dumps: found as the default action, a request in a rank's last moments ended a rank that
    # had finished. Found as SIG_IGN, it is ignored then.
    _ignore_late_dumps(signum)
    faulthandler.register(signum, file=handle, all_threads=True, chain=False)
    try:
        os.replace(opening, os.path.join(live, f"pid{os.getpid()}.txt"))
    except OSError:
        faulthandler.unregister(signum)
        return
    global _HANDLE
    _HANDLE = handle  # keep the file open for the handler
    if not forked:
        _start_flight_listener(live, signum)


_HANDLE = None


INSTRUMENT_ENV = "MGTUTOR_INSTRUMENT"
_HOOK_MODULE = "mgtutor.training.worker.rank_hook"


def _instrumentation_off(exc: BaseException) -> None:
    try:
        text = f"{type(exc).__name__}: {exc}".replace("\n", " ")[:300]
        print(f"mgtutor: instrumentation off ({text})", file=sys.stderr, flush=True)
    except Exception:
        pass


def _measure() -> None:
    """torch has been imported: hook it (the worker module imports torch, and only now)."""
    try:
        import importlib

        importlib.import_module(_HOOK_MODULE).install()
    except Exception as exc:  # never the script's failure
        _instrumentation_off(exc)


class _ThenMeasure:
    """torch's own loader, and `then()` once torch's module has run (not if it raised)."""

    def __init__(self, inner: object, then: object = None) -> None:
        self.inner = inner
        self.then = then or _measure

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def create_module(self, spec: object) -> object:
        return self.inner.create_module(spec)  # type: ignore[attr-defined]

    def exec_module(self, module: object) -> None:
        spec = getattr(module, "__spec__", None)
        try:  # torch sees its own loader, as without the hook
            if spec is not None:
                spec.loader = self.inner
            module.__loader__ = self.inner  # type: ignore[attr-defined]
        except Exception:
            pass
        self.inner.exec_module(module)  # type: ignore[attr-defined]
        self.then()  # type: ignore[operator]


class _AwaitTorch:
    """A meta path finder that finds nothing itself: at `import torch` it takes itself out of
    `sys.meta_path`, lets the other finders find torch, and wraps the loader they found."""

    def __init__(self, module: str = "torch", then: object = None) -> None:
        self.module = module
        self.then = then or _measure

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if name != self.module:
            return None
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        try:
            import importlib.util

            spec = importlib.util.find_spec(name)
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            spec.loader = _ThenMeasure(spec.loader, self.then)  # type: ignore[assignment]  # a Loader by delegation
            return spec
        except Exception as exc:
            _instrumentation_off(exc)
            return None  # the import goes on without us

    def invalidate_caches(self) -> None:
        pass


def _install_measure() -> None:
    if os.environ.get(INSTRUMENT_ENV) != "1" or "RANK" not in os.environ or not os.environ.get("MGTUTOR_EVENTS"):
        return
    if "torch" in sys.modules:  # a .pth file imported it already
        _measure()
        return
    sys.meta_path.insert(0, _AwaitTorch())


def _chain_next_sitecustomize() -> None:
    """Import the sitecustomize that this one shadows, if any (a venv's or a distribution's)."""
    here = os.path.dirname(os.path.abspath(__file__))
    module = sys.modules.pop("sitecustomize", None)
    saved = list(sys.path)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import sitecustomize  # type: ignore[import-not-found]  # noqa: F401  (the next one on the path)
    except ImportError:
        pass
    except Exception as exc:  # the shadowed hook failed: say so, as Python itself would
        print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        sys.path[:] = saved
        if module is not None:
            sys.modules.setdefault("sitecustomize", module)


try:
    _install()
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=lambda: _install(forked=True))  # forked workers: own file, no thread
except Exception:  # never break the user's interpreter start
    pass
try:
    _install_measure()
except Exception as _exc:  # never break the user's interpreter start
    _instrumentation_off(_exc)
_chain_next_sitecustomize()
