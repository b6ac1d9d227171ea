"""Shared fixtures: every test gets its own XDG state/data/config homes, so runs and progress never
touch the user's files and tests never see each other's runs."""
from __future__ import annotations

import _posixsubprocess
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from textual import constants as _textual_constants

REPO = Path(__file__).resolve().parent.parent

# Containers often export PYTHONDONTWRITEBYTECODE: then each of the suite's processes (the two workers, each
# CLI and torchrun child) compiles mgtutor and the test modules anew, a second or more every time.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# No animations in the apps the tests drive (a tab's underline slides for a while after each switch,
# and Pilot waits it out); the apps the tests start as processes inherit the same.
os.environ["TEXTUAL_ANIMATIONS"] = "none"
_textual_constants.TEXTUAL_ANIMATIONS = "none"


def examples(full: int) -> int:
    """A Hypothesis test's number of examples: `full` in the whole suite, a fifth of it in the fast tier
    (the profile pytest_configure loads), so a maintainer's run before each commit stays short."""
    from hypothesis import settings

    return max(10, full * settings.default.max_examples // 100)


def fast_tier(config: pytest.Config) -> bool:
    return "not integration" in (config.option.markexpr or "")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """One worker more than the cores (at most three): its Pilot tests sit about a fifth of their time in
    pause() waiting for the app to go idle, and the whole suite's real runs wait on their processes. Three
    took the whole suite from 995 s to 805-832 s on two cores; see docs/benchmarks.md."""
    return min(os.cpu_count() or 1, 2) + 1


def _hypothesis_profile(config: pytest.Config) -> None:
    from hypothesis import settings

    settings.register_profile("full", max_examples=100)
    settings.register_profile("fast", max_examples=20)
    settings.load_profile(os.environ.get("MGTUTOR_HYPOTHESIS", "fast" if fast_tier(config) else "full"))


def pytest_configure(config: pytest.Config) -> None:
    """Under nohup every child inherits SIGHUP ignored, and a shell's background job SIGINT and SIGQUIT; mgtutor
    keeps an ignored signal ignored, so the tests of a closed terminal, Ctrl+C or Ctrl+\\ would test how pytest
    was started. Caught here, they reach every child the tests start as SIG_DFL, as a terminal's foreground job
    has them (exec resets a caught signal): no child needs to reset them before exec."""
    _hypothesis_profile(config)
    _children_collect_less_while_importing_torch()
    if not hasattr(config, "workerinput"):  # once, in the process that starts the xdist workers
        _compile_torch_once()
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    if signal.getsignal(signal.SIGQUIT) == signal.SIG_IGN:
        signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


CHILD_SITE = REPO / "tests" / "child_site"


def _children_collect_less_while_importing_torch() -> None:
    """Every Python process the tests start collects cyclic garbage less often while it imports torch and
    torch._dynamo (tests/child_site/sitecustomize.py says why). Not this worker: its Pilot tests make cyclic garbage
    all along, and collecting it less often made the fast tier slower (55 s against 39 s)."""
    path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(CHILD_SITE)]
    os.environ["PYTHONPATH"] = os.pathsep.join([str(CHILD_SITE), *path])


# What a training rank imports: torch, torchrun's agent, and what an optimizer's or DDP's constructor imports.
TORCH_MODULES = ("torch", "torch._dynamo", "torch._inductor", "torch.distributed.run", "torchvision")


def _compile_torch_once() -> None:
    """After `pip install --no-compile` (the README's test command) torch's modules have no bytecode yet, and the
    first real runs of the three workers, nine or so processes at once, would each compile the same thousands of
    modules (about 4 CPU s apiece). One process compiles them first; when their bytecode is there, nothing runs."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return
    marker = Path(spec.origin).parent / "_inductor" / "__init__.py"
    if Path(importlib.util.cache_from_source(str(marker))).exists():
        return
    subprocess.run([sys.executable, "-c", "import " + ", ".join(TORCH_MODULES)], check=False, timeout=600,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


XDG_HOMES = ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")


def homes_under(home: Path) -> dict[str, str]:
    """The XDG variables naming folders of `home`: a run's own state, data, config and cache."""
    return {name: str(home / name.lower()) for name in XDG_HOMES}


@pytest.fixture(autouse=True)
def xdg_homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, path in homes_under(tmp_path).items():
        Path(path).mkdir()
        monkeypatch.setenv(name, path)
    return tmp_path


@pytest.fixture(autouse=True)
def english_by_default(monkeypatch: pytest.MonkeyPatch):
    """Tests read English unless they choose Chinese: whatever the developer's locale, and whatever
    language a test before switched to (the language is process-wide, like gettext's)."""
    from mgtutor.training.foundation.i18n import set_language

    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANGUAGE", "en")
    set_language("en")
    yield
    set_language("en")


@pytest.fixture(autouse=True)
def fresh_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVML starts once per process; each test starts it anew, so MGTUTOR_NO_NVML set by a test is what
    it sees, whatever ran before it."""
    from mgtutor.training.runs import nvml

    monkeypatch.setattr(nvml, "_state", {"initialised": False, "error": None, "pynvml": None})


@pytest.fixture
def write_script(tmp_path: Path):
    """Write a small Python script into the test's folder and return its path."""

    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


class ProcessInFastTest(RuntimeError):
    """A test outside the integration tier tried to start a process."""


# Every way a test (or the code under it) can start a process: Popen covers subprocess.run and
# asyncio's subprocesses; fork_exec covers multiprocessing's spawn; fork/forkpty cover pty and os.spawn*.
_SPAWNERS = (
    (subprocess.Popen, "__init__"),
    (_posixsubprocess, "fork_exec"),
    (os, "fork"),
    (os, "forkpty"),
    (os, "posix_spawn"),
    (os, "posix_spawnp"),
    (os, "system"),
)


SPAWNS = pytest.StashKey[list[str]]()


@pytest.fixture(autouse=True)
def no_processes_in_fast_tests(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the fast tier honest: a test not marked `integration` (or `gpu`) that starts a process
    fails, even where the code under test catches the error, so slow tests cannot hide in it."""
    node = request.node
    if node.get_closest_marker("integration") or node.get_closest_marker("gpu"):
        return
    attempts = node.stash.setdefault(SPAWNS, [])

    def refuse(owner: object, name: str):
        def spawn(*args: object, **kwargs: object) -> None:
            attempts.append(f"{getattr(owner, '__name__', owner)}.{name}")
            raise ProcessInFastTest(f"{node.nodeid} starts a process ({attempts[-1]}): mark it integration")

        return spawn

    for owner, name in _SPAWNERS:
        if hasattr(owner, name):
            monkeypatch.setattr(owner, name, refuse(owner, name))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """A test that passed although the code under it swallowed the refused start still fails."""
    outcome = yield
    report = outcome.get_result()
    attempts = item.stash.get(SPAWNS, [])
    if report.when != "call" or not attempts:
        return
    message = f"{item.nodeid} starts a process ({', '.join(attempts)}): mark it integration"
    if report.passed:
        report.outcome = "failed"
        report.longrepr = message
    elif report.failed:  # e.g. a worker thread's refused start made the test wait and fail otherwise
        report.sections.append(("processes refused", message))


def _cpu_seconds() -> tuple[float, float]:
    """(this worker's CPU seconds with its reaped children's, the worker's own)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    worker = own.ru_utime + own.ru_stime
    return worker + children.ru_utime + children.ru_stime, worker


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """MGTUTOR_TEST_CPU=FILE: each test's CPU seconds (its worker's and every process it started and reaped)
    appended to FILE, one `seconds<TAB>test id<TAB>the worker's own seconds` line: what a test costs on a shared
    machine, where its wall time depends on what runs beside it (tests/README.md, "What the suite costs")."""
    target = os.environ.get("MGTUTOR_TEST_CPU")
    began = _cpu_seconds() if target else (0.0, 0.0)
    yield
    if target:
        ended = _cpu_seconds()
        with open(target, "a", encoding="utf-8") as out:
            out.write(f"{ended[0] - began[0]:.2f}\t{item.nodeid}\t{ended[1] - began[1]:.2f}\n")


STANDIN_TORCHRUN = REPO / "tests" / "standin" / "torchrun.py"
STANDIN_ARGV = [sys.executable, str(STANDIN_TORCHRUN)]
STANDIN_LAUNCHER = shlex.join(STANDIN_ARGV)  # MGTUTOR_LAUNCHER's value for the stand-in


@pytest.fixture
def standin_torchrun(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Runs this test launches (in process or through the CLI) start their ranks with the torch-free
    stand-in instead of torchrun: for tests of mgtutor's own plumbing, not of torchrun's."""
    from mgtutor.training.runs.launch.launcher import LAUNCHER_ENV

    monkeypatch.setenv(LAUNCHER_ENV, STANDIN_LAUNCHER)
    return list(STANDIN_ARGV)


@pytest.fixture(scope="session")
def doctor_runs(tmp_path_factory: pytest.TempPathFactory):
    """`mgtutor doctor`'s outputs, each run once per worker (tests/doctor_runs.py); tests that read them
    carry @pytest.mark.xdist_group("doctor"), so they share one worker."""
    from tests.doctor_runs import DoctorRuns

    return DoctorRuns(tmp_path_factory.mktemp("doctor"))


@pytest.fixture(scope="session")
def plain_ddp_run(tmp_path_factory: pytest.TempPathFactory):
    """A real `mgtutor run --nproc 2 -- tests/data/plain_ddp.py` (no mgtutor import in the script; the ranks'
    hook measures it), run once per worker (tests/hook_runs.py): every test that reads a hook-measured
    record reads this one, and carries @pytest.mark.xdist_group("plain_ddp") so they share one worker.
    A test that writes into the record (a report, the Monitor's files) copies it first."""
    from tests.hook_runs import PLAIN_DDP, mgtutor_run

    return mgtutor_run(tmp_path_factory.mktemp("plain_ddp"), PLAIN_DDP)


def mgtutor_argv(*args: str) -> list[str]:
    """The CLI as a subprocess, through the installed package (no PATH lookup)."""
    return [sys.executable, "-m", "mgtutor.tui", *args]


def no_gpu_env() -> dict[str, str]:
    return dict(os.environ, MGTUTOR_NO_NVML="1")


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Where the GPU suite is left out, its modules are not even imported (some import torch: 2 s a worker)."""
    if "not gpu" in (config.option.markexpr or "") and collection_path.is_relative_to(REPO / "tests" / "gpu"):
        return True
    return None


# Two loopback gloo ranks that fail to build their mesh ("Gloo connectFullMesh failed … Connection closed by peer":
# gloo's own, about once in 2,000 tests under the suite's load): a real-process test gets one more try for that
# failure only. Per test, not in addopts: with xdist, pytest-rerunfailures asks the controller over a socket about
# every test it may rerun, which cost the fast tier (no process, no gloo) 13 s of its 63.
GLOO_MESH_FLAKE = "Gloo connectFullMesh failed"


def pytest_collection_modifyitems(config, items):
    """Everything under tests/gpu/ is the GPU suite: `pytest -m gpu` on a machine with 2+ NVIDIA GPUs."""
    gpu_dir = str(REPO / "tests" / "gpu")
    for item in items:
        if str(item.fspath).startswith(gpu_dir):
            item.add_marker(pytest.mark.gpu)
        if item.get_closest_marker("integration") is not None:
            item.add_marker(pytest.mark.flaky(reruns=1, only_rerun=[GLOO_MESH_FLAKE]))
    if fast_tier(config) and os.environ.get("MGTUTOR_SWEEPS") != "all":
        _first_case_of_each_sweep(config, items)
    # xdist hands out tests in this order: the long real-process tests first, the short ones last to fill the
    # cores while the last long ones end (in collection order the last file's runs ended with a core idle)
    items.sort(key=lambda item: item.get_closest_marker("integration") is None)


def _first_case_of_each_sweep(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A sweep (`@pytest.mark.sweep`: one check over every mode, screen or symptom, each case the same code
    on other data) runs its first case in the fast tier and every case in the whole suite, as Hypothesis
    runs fewer examples there: each path is still taken before a commit."""
    seen: set[tuple[str, str]] = set()
    kept, left_out = [], []
    for item in items:
        if item.get_closest_marker("sweep") is not None:
            key = (str(item.path), getattr(item, "originalname", item.name))
            if key in seen:
                left_out.append(item)
                continue
            seen.add(key)
        kept.append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


@pytest.fixture(scope="session")
def two_gpus():
    from mgtutor.training.runs.nvml import inventory

    inv = inventory()
    if len(inv.gpus) < 2:
        pytest.skip(f"needs 2 NVIDIA GPUs; found {len(inv.gpus)} ({inv.error})")
    return inv


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything imported to collect the suite lives to its end: frozen, the garbage collector stops
    walking those objects again at each full collection (and pytest's five at the end)."""
    import gc

    gc.collect()
    gc.freeze()
