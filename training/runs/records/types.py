"""The run directory's JSON files as dataclasses: meta.json, ranks/rank<R>.json, result.json.

`from_json` accepts every record written so far (a missing field takes its default, an unknown
one is kept in `extra` and written back); `to_json` writes the documented shape. Statuses are a
str-valued enum, so `status == "failed"` and the JSON on disk stay as they were.
"""
from __future__ import annotations

import dataclasses
import signal
from dataclasses import dataclass, field
from enum import Enum
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from mgtutor.training.foundation.i18n import N_
from mgtutor.training.foundation.json_decode import Bounds, decode_lenient, shown
from mgtutor.training.foundation.said import Said, english

T = TypeVar("T")


class RunStatus(str, Enum):
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    STOPPED = "stopped"
    LOST = "lost"  # no result and no live supervisor

    @property
    def terminal(self) -> bool:
        return self is not RunStatus.RUNNING

    def __str__(self) -> str:  # f-strings print "failed", not "RunStatus.FAILED"
        return self.value

    @classmethod
    def parse(cls, value: Any, default: RunStatus) -> RunStatus:
        try:
            return cls(value)
        except ValueError:
            return default


# A record's `problem` when fields have the wrong type: English Saids, said again in the reader's language.
FIELD_IS = N_("{key} is {value}")
WRONG_TYPE = N_("wrong type: {fields}")
IN_A_LIST = N_("{first}, {rest}")


def listed(items: list[Said]) -> Said:
    """Several Saids as one, the separator said in the reader's language too."""
    said = items[-1]
    for item in reversed(items[:-1]):
        said = english(IN_A_LIST, first=item, rest=said)
    return said

# What a record's numbers may be: a hand-written or hostile record must not make a reader build a
# billion ranks, signal a pid no kernel has, or format a time past the year 2286.
MAX_RANKS = 1 << 20  # a job's world
MAX_LOCAL_RANKS = 1 << 12  # the ranks one node hosts (and one record lists)
RANKS = Bounds(0, MAX_RANKS)
LOCAL = Bounds(0, MAX_LOCAL_RANKS)
LISTED = Bounds(items=MAX_LOCAL_RANKS)  # one entry per rank of this node at most
PID = Bounds(0, (1 << 31) - 1)  # 0: none (a supervisor not started yet)
EXIT = Bounds(-(1 << 31), (1 << 31) - 1)
TIME = Bounds(0, 1e10)  # unix seconds
SECONDS = Bounds(-1e10, 1e10)
# a signal this OS names, or what launch/rank.py signal_name writes for one it does not: an unknown name is no signal
_KNOWN_SIGNALS = "|".join(sorted((s.name for s in signal.Signals if s.name.startswith("SIG") and "_" not in s.name),
                                 key=len, reverse=True))
SIGNAL = Bounds(pattern=rf"(?:{_KNOWN_SIGNALS})|SIGRTMIN\+\d{{1,2}}|SIGRTMAX-\d{{1,2}}|signal \d{{1,3}}")


def _from_json(cls: type[T], data: Any) -> T:
    """The dataclass from a JSON object (json_decode's rules): known fields that fit, the rest in `extra`.
    A known field that does not fit (a wrong type, out of its bounds) takes its default, and `problem`
    (where the class has it) says which."""
    obj, wrong = decode_lenient(cls, data if isinstance(data, dict) else {}, skip=("problem",))
    if wrong and "problem" in {f.name for f in dataclasses.fields(cls)}:  # type: ignore[arg-type]
        fields = listed([english(FIELD_IS, key=w.field, value=shown(w.value)) for w in wrong])
        object.__setattr__(obj, "problem", english(WRONG_TYPE, fields=fields))
    return obj


def _to_json(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for spec in dataclasses.fields(obj):
        if spec.name in ("extra", "problem"):
            continue
        value = getattr(obj, spec.name)
        if isinstance(value, Enum):
            value = value.value
        elif dataclasses.is_dataclass(value):
            value = value.to_json()  # type: ignore[union-attr]
        elif isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            value = [v.to_json() for v in value]
        out[spec.name] = value
    out.update(obj.extra)
    return out


class JsonRecord:
    """A record file's dataclass: read with `from_json` (unknown fields kept in `extra`), written with `to_json`."""

    @classmethod
    def from_json(cls: type[T], data: Any) -> T:
        return _from_json(cls, data)

    def to_json(self) -> dict[str, Any]:
        return _to_json(self)


class RankExitCode:
    """What a rank's exit says: `exit_code` and `signal` fields, one test of failure."""
    exit_code: int | None
    signal: str | None

    @property
    def failed(self) -> bool:
        return self.signal is not None or self.exit_code not in (0, None)



# How a run ended, whole sentences for the catalogue (the record's English is their msgid)
RUN_FAILED_FIRST = N_("run failed: rank {rank} failed first ({how})")
BY_SIGNAL, BY_EXIT = N_("signal {signal}"), N_("exit code {code}")
RUN_ENDED = {RunStatus.FINISHED: N_("run finished in {seconds} s on {ranks} {backend} rank(s)"),
             RunStatus.FAILED: N_("run failed in {seconds} s on {ranks} {backend} rank(s)"),
             RunStatus.STOPPED: N_("run stopped in {seconds} s on {ranks} {backend} rank(s)")}

@dataclass
class RunMeta(JsonRecord):
    """meta.json: what was launched, where, and when. `problem` says why the file could not be read."""
    run_id: str = ""
    label: str = ""
    target: list[str] = field(default_factory=list)
    torchrun_argv: list[str] = field(default_factory=list)
    world_size: Annotated[int, RANKS] = 0
    nproc_per_node: Annotated[int, LOCAL] = 0
    nnodes: Annotated[int, RANKS] = 1
    node_rank: Annotated[int, RANKS] = 0
    backend: str = ""
    devices: list[dict[str, Any]] = field(default_factory=list)
    device_note: str = ""
    device_said: dict[str, Any] | None = None  # the note as a message id with its arguments (foundation/said.py)
    env: dict[str, str] = field(default_factory=dict)
    secret_digests: dict[str, Any] = field(default_factory=dict)  # keyed hashes of the secrets at launch (secrets.py)
    host: str = ""
    cwd: str = ""
    started: Annotated[float | None, TIME] = None
    ended: Annotated[float | None, TIME] = None
    status: RunStatus = RunStatus.RUNNING
    supervisor_pid: Annotated[int | None, PID] = None
    pgid: Annotated[int | None, PID] = None
    torchrun_pid: Annotated[int | None, PID] = None
    global_ranks: Annotated[list[Annotated[int, RANKS]], LISTED] = field(default_factory=list)
    # multi-node only (training/runs/net/multinode.py)
    rdzv_endpoint: str | None = None
    rdzv_id: str | None = None
    rdzv_is_host: bool = False
    rdzv_timeout_s: int | None = None
    local_addr: str | None = None
    iface: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None  # not on disk: "meta.json is missing / unreadable: …"

    def __post_init__(self) -> None:
        self.status = RunStatus.parse(self.status, RunStatus.RUNNING)
        self.world_size = _int(self.world_size)
        self.nproc_per_node = _int(self.nproc_per_node)
        self.nnodes = _int(self.nnodes) or 1
        self.node_rank = _int(self.node_rank)
        self.backend = self.backend or ""


    @property
    def multinode(self) -> bool:
        return self.nnodes > 1

    def speaks_events(self) -> bool:
        """Whether the target is one of our workers (which emit events) rather than a user's script."""
        return len(self.target) > 1 and self.target[0] == "-m" and str(self.target[1]).startswith("mgtutor.")


@dataclass
class RankExit(JsonRecord, RankExitCode):
    """ranks/rank<R>.json, written by the rank wrapper when the rank starts and again when it ends."""
    rank: Annotated[int, RANKS] = 0
    local_rank: Annotated[int, LOCAL] = 0
    node_rank: Annotated[int, RANKS] = 0
    world_size: Annotated[int, RANKS] = 1
    pid: Annotated[int | None, PID] = None
    wrapper_pid: Annotated[int | None, PID] = None
    started: Annotated[float | None, TIME] = None
    ended: Annotated[float | None, TIME] = None
    exit_code: Annotated[int | None, EXIT] = None
    signal: Annotated[str | None, SIGNAL] = None
    extra: dict[str, Any] = field(default_factory=dict)



@dataclass
class RankOutcome(JsonRecord, RankExitCode):
    """One rank's line in result.json."""
    rank: Annotated[int, RANKS] = 0
    exit_code: Annotated[int | None, EXIT] = None
    signal: Annotated[str | None, SIGNAL] = None
    pid: Annotated[int | None, PID] = None
    ended: Annotated[float | None, TIME] = None
    outcome: str = ""  # ok | failed | stopped | stopped after the first failure | never started | no exit recorded
    extra: dict[str, Any] = field(default_factory=dict)



@dataclass
class FirstFailure:
    rank: Annotated[int | None, RANKS] = None
    exit_code: Annotated[int | None, EXIT] = None
    signal: Annotated[str | None, SIGNAL] = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> FirstFailure | None:
        return _from_json(cls, data) if isinstance(data, dict) else None

    def to_json(self) -> dict[str, Any]:
        return _to_json(self)

    def how(self, say: Callable[[str], str] = str) -> str:
        return say(BY_SIGNAL).format(signal=self.signal) if self.signal else say(BY_EXIT).format(code=self.exit_code)


@dataclass
class StopReport:
    """What `Run.stop` did: how many processes it signalled, which needed SIGKILL, who survived."""
    requested: Annotated[float | None, TIME] = None
    processes: int = 0
    killed: Annotated[list[Any], LISTED] = field(default_factory=list)
    survivors: Annotated[list[Any], LISTED] = field(default_factory=list)
    clean: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> StopReport | None:
        return _from_json(cls, data) if isinstance(data, dict) else None

    def to_json(self) -> dict[str, Any]:
        return _to_json(self)


@dataclass
class RunResult(JsonRecord):
    """result.json: per-rank outcomes, who failed first, how long it took."""
    run_id: str = ""
    status: RunStatus = RunStatus.FINISHED
    backend: str | None = None
    world_size: Annotated[int, RANKS] = 0
    nnodes: Annotated[int, RANKS] = 1
    node_rank: Annotated[int, RANKS] = 0
    ranks: Annotated[list[RankOutcome], LISTED] = field(default_factory=list)
    first_failure: FirstFailure | None = None
    torchrun_exit_code: Annotated[int | None, EXIT] = None
    duration_s: Annotated[float | None, SECONDS] = None
    stop: StopReport | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None  # not on disk: which fields of result.json had the wrong type

    def __post_init__(self) -> None:
        self.status = RunStatus.parse(self.status, RunStatus.FINISHED)
        self.ranks = [r if isinstance(r, RankOutcome) else RankOutcome.from_json(r)
                      for r in (self.ranks if isinstance(self.ranks, list) else [])]
        if isinstance(self.first_failure, dict):
            self.first_failure = FirstFailure.from_json(self.first_failure)
        if isinstance(self.stop, dict):
            self.stop = StopReport.from_json(self.stop)
        self.world_size = _int(self.world_size)

    def to_json(self) -> dict[str, Any]:
        out = _to_json(self)
        if self.stop is None:
            out.pop("stop")
        return out

    def describe(self, say: Callable[[str], str] = str) -> str:
        """One line: who failed first and how, or how the run ended (English by default, as the record
        says it; `say=_` for the reader)."""
        if self.first_failure:
            return say(RUN_FAILED_FIRST).format(rank=self.first_failure.rank, how=self.first_failure.how(say))
        ended = RUN_ENDED.get(self.status)
        if ended and self.duration_s is not None and self.world_size and self.backend:
            return say(ended).format(seconds=self.duration_s, ranks=self.world_size, backend=self.backend)
        took = f" in {self.duration_s} s" if self.duration_s is not None else ""
        where = f" on {self.world_size} {self.backend or ''} rank(s)".replace("  ", " ") if self.world_size else ""
        return f"run {self.status}{took}{where}"


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
