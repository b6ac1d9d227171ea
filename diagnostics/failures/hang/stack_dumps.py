"""Read Python stack dumps (py-spy's text, faulthandler's) into frames, and say where a process waits.

    procs = parse_rank_file(Path("stacks/<id>/rank1.txt").read_text())
    where = locate(procs)        # the user's innermost frame, the torch call it waits in, what kind

Frames are kept innermost first. "The user's code" is any file outside the Python installation,
site-packages, torch.compile's generated code and mgtutor's own run layer; that is where a fix goes,
so that is what the report names. A faulthandler dump marks the thread it was written from ("Current
thread"): after a fatal signal, that is the thread that crashed (fatal_error.py reads those).
"""
from __future__ import annotations

import linecache
import re
from dataclasses import dataclass, field
from typing import Callable

from mgtutor.training.foundation.i18n import N_

from mgtutor.training.runs.forensics.pyspy_text import NATIVE

_PROCESS = re.compile(r"^=== process (\d+) \(rank (\d+), (\w+)\) via ([\w-]+) ===$")
_PYSPY_THREAD = re.compile(r'^Thread (\S+) \(([^)]*)\)(?:: "(.*)")?$')
_PYSPY_NATIVE = re.compile(rf"^    {re.escape(NATIVE)} (\S.*)$")  # matched first: native frames are not the user's code
_PYSPY_FRAME = re.compile(r"^    (\S.*) \((.+):(\d+)\)$")
_PYSPY_ARG = re.compile(r"^            (\w+): (.*)$")
# "Stack": the one thread of a dump without all_threads; newer Pythons add the thread's name in brackets
_FH_THREAD = re.compile(r"^(?:(Current thread|Thread) (0x[0-9a-f]+)(?: \[.*\])?|(Stack)) \(most recent call first\):$")
_FH_FRAME = re.compile(r'^  File "(.+)", line (\d+) in (.+)$')

INIT_CALLS = {"init_process_group", "rendezvous", "_create_c10d_store", "_store_based_barrier",
              "_new_process_group_helper", "_env_rendezvous_handler", "new_group", "init_device_mesh"}
COLLECTIVES = {"all_reduce", "broadcast", "barrier", "all_gather", "all_gather_into_tensor", "reduce_scatter",
               "reduce_scatter_tensor", "reduce", "gather", "scatter", "all_to_all", "all_to_all_single",
               "send", "recv", "monitored_barrier", "broadcast_object_list", "all_gather_object",
               "gather_object", "scatter_object_list", "_all_gather_base", "_reduce_scatter_base",
               "all_reduce_coalesced", "batch_isend_irecv"}
# native frames of a rank whose NCCL communicator is being set up: it waits for every peer to join
NCCL_SETUP = ("ncclCommInitRank", "bootstrapInit", "ProcessGroupNCCL::initNCCLComm")
BACKWARD_CALLS = {"backward", "_engine_run_backward", "run_backward"}
DATA_CALLS = {"_next_data", "__next__", "_get_data", "_try_get_data"}
LIBRARY_MARKERS = ("/site-packages/", "/dist-packages/", "<frozen ", "/training/runs/", "/torchinductor_")
# mgtutor's own rank programs stand in for the user's script (a demo, a lesson), wherever installed
USER_MARKERS = ("/mgtutor/lessons/", "/diagnostics/failures/demo_workers.py")


@dataclass(frozen=True)
class Frame:
    function: str  # as the tool printed it: "Numbers.__getitem__" (py-spy) or "__getitem__"
    file: str
    line: int
    args: tuple[tuple[str, str], ...] = ()
    at: int = field(default=-1, compare=False)  # index of the line it was read from in the parsed text

    @property
    def short_name(self) -> str:
        return self.function.rsplit(".", 1)[-1]

    def arg(self, name: str) -> str | None:
        return next((v for k, v in self.args if k == name), None)


@dataclass
class Thread:
    name: str
    frames: list[Frame] = field(default_factory=list)  # innermost first
    native: list[str] = field(default_factory=list)  # py-spy --native: the native frames' text, innermost first
    current: bool = False  # faulthandler's "Current thread": the one that wrote the dump

    @property
    def is_main(self) -> bool:
        """A thread started by `threading` has threading.py's _bootstrap outermost; the main thread not."""
        if self.name:
            return self.name == "MainThread"
        return not (self.frames and self.frames[-1].file.endswith("threading.py"))


@dataclass
class ProcessDump:
    pid: int
    rank: int
    role: str  # main | worker
    method: str  # py-spy | signal | none
    threads: list[Thread] = field(default_factory=list)
    problem: str | None = None

    def main_thread(self) -> Thread | None:
        return next((t for t in self.threads if t.is_main), self.threads[0] if self.threads else None)


def parse_dump(text: str) -> list[Thread]:
    """Threads of one process from py-spy's text or faulthandler's output (either, detected per line)."""
    threads: list[Thread] = []
    current: Thread | None = None
    args: list[tuple[str, str]] = []
    for index, raw in enumerate(text.splitlines()):
        line = raw.rstrip()
        if m := _PYSPY_THREAD.match(line):
            current = Thread(name=m.group(3) or "")
            threads.append(current)
        elif m := _FH_THREAD.match(line):
            current = Thread(name="", current=bool(m.group(1) == "Current thread" or m.group(3)))
            threads.append(current)
        elif current is None:
            continue
        elif m := _PYSPY_NATIVE.match(line):
            current.native.append(m.group(1))
        elif m := _PYSPY_FRAME.match(line):
            current.frames.append(Frame(m.group(1), m.group(2), int(m.group(3)), at=index))
            args = []
        elif m := _FH_FRAME.match(line):
            current.frames.append(Frame(m.group(3), m.group(1), int(m.group(2)), at=index))
        elif (m := _PYSPY_ARG.match(line)) and current.frames:
            args.append((m.group(1), m.group(2).strip('"')))
            last = current.frames[-1]
            current.frames[-1] = Frame(last.function, last.file, last.line, tuple(args), last.at)
    return threads


def parse_rank_file(text: str) -> list[ProcessDump]:
    """A capture's rank<R>.txt: one `=== process … ===` section per process of that rank."""
    procs: list[ProcessDump] = []
    body: list[str] = []
    for line in text.splitlines():
        if m := _PROCESS.match(line):
            _close(procs, body)
            procs.append(ProcessDump(pid=int(m.group(1)), rank=int(m.group(2)), role=m.group(3), method=m.group(4)))
            body = []
        else:
            body.append(line)
    _close(procs, body)
    return procs


def _close(procs: list[ProcessDump], body: list[str]) -> None:
    if not procs:
        return
    text = "\n".join(body)
    procs[-1].threads = parse_dump(text)
    if procs[-1].method == "none":
        procs[-1].problem = text.strip().removeprefix("(no stack: ").removesuffix(")") or "no stack"


def is_user_file(path: str) -> bool:
    if any(marker in path for marker in USER_MARKERS):
        return True
    if any(marker in path for marker in LIBRARY_MARKERS) or path.startswith("<"):
        return False
    return not re.search(r"/lib/python3\.\d+/", path)


@dataclass
class Where:
    """Where one process waits: the user's frame, and the library call below it."""
    category: str  # init | collective | backward | data | gpu | sleep | user code | no stack
    op: str | None  # init_process_group, all_reduce, DataLoader, sleep …
    frame: Frame | None  # innermost frame in the user's code
    source: str = ""  # that line's text, when the file is readable here
    args: dict[str, str] = field(default_factory=dict)  # e.g. world_size from init_process_group
    inner: str | None = None  # the innermost torch.distributed function (how far init got)
    comm_setup: bool = False  # in a collective, inside NCCL's communicator setup (native frames say so)

    def place(self, say: Callable[[str], str] = str) -> str:
        """'hang.py:48 in main': in English (the report's record) unless `say` translates."""
        if self.frame is None:
            return "?"
        return say(N_("{file}:{line} in {function}")).format(file=_short(self.frame.file), line=self.frame.line,
                                                               function=self.frame.short_name)


def locate(thread: Thread | None) -> Where:
    if thread is None or not thread.frames:
        return Where("no stack", None, None)
    frames = thread.frames
    user_index = next((i for i, f in enumerate(frames) if is_user_file(f.file)), None)
    user = frames[user_index] if user_index is not None else None
    below = frames[:user_index] if user_index is not None else frames
    source = linecache.getline(user.file, user.line).strip() if user else ""
    args: dict[str, str] = {}
    for frame in below:
        if frame.short_name in INIT_CALLS:
            args.update({k: v for k, v in frame.args})
    names = [f.short_name for f in reversed(below)]  # outermost (next to the user's code) first
    dist_names = [f.short_name for f in reversed(below) if "/torch/distributed/" in f.file]
    if any(n in INIT_CALLS for n in dist_names):
        return Where("init", "init_process_group" if "init_process_group" in dist_names else dist_names[0],
                     user, source, args, inner=dist_names[-1])
    op = next((n for n in dist_names if n in COLLECTIVES), None)
    if op:
        setup = any(marker in native for native in thread.native for marker in NCCL_SETUP)
        return Where("collective", op, user, source, comm_setup=setup)
    if any(n in BACKWARD_CALLS for n in names):
        return Where("backward", "backward (DDP's gradient all-reduce)", user, source)
    if any(n in DATA_CALLS for n in names) and any("/torch/utils/data/" in f.file for f in below):
        return Where("data", "DataLoader", user, source)
    if any(f.short_name == "synchronize" and "/torch/cuda/" in f.file for f in below) or \
            any(call in source for call in (".item()", ".cpu()", ".tolist()", "synchronize(")):
        return Where("gpu", "the GPU (a pending NCCL collective?)", user, source)
    if "sleep(" in source or any(n == "sleep" for n in names):
        return Where("sleep", "sleep", user, source)
    return Where("user code", None, user, source)


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]
