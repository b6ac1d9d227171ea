"""A rank that died of a fatal signal, read from faulthandler's dump in its log (fatal_error.py): the
fatal error, the innermost Python line of the thread that crashed, the user's own line on it, and a
fix for a crash in native code. The log of tests/data/logs is real; the others are written here the
way faulthandler writes them."""
from __future__ import annotations

from pathlib import Path

from mgtutor.diagnostics.failures.catalogue import load_catalogue
from mgtutor.diagnostics.failures.classify import diagnose_files, diagnose_lines
from mgtutor.diagnostics.failures.hang.stack_dumps import is_user_file, parse_dump
from mgtutor.diagnostics.failures.logs.logparse import read_text
from mgtutor.diagnostics.failures.logs.scan import Scanner

LOGS = Path(__file__).parent / "data" / "logs"
# torch 2.14, Python 3.11, torchrun with 2 gloo ranks and PYTHONFAULTHANDLER=1: rank 1 reads address 0
# through ctypes inside its training step while a helper thread sleeps; rank 0 then loses its peer.
# Captured as it came, but for the install prefixes, which read /usr/lib/python3.11 and /home/user.
SEGFAULT = LOGS / "segfault_faulthandler.log"


def test_a_segfault_names_the_fatal_error_the_crashing_line_and_the_users_line() -> None:
    finding = diagnose_files([SEGFAULT])[0]
    assert (finding.kind, finding.rank) == ("child_failed", 1)
    assert finding.summary == (
        'Rank 1 failed first (signal SIGSEGV), with "Fatal Python error: Segmentation fault" in its log: the crash '
        "came from native code called at ctypes/__init__.py:519 in string_at (your code: segv_step.py:10 in "
        "read_native).")
    assert "the closest line is ctypes/__init__.py:519 in string_at" in finding.fix
    assert "rank 1's log (stderr)" in finding.fix
    assert "your code at segv_step.py:10 in read_native hands to native code" in finding.fix


def test_its_evidence_is_the_fatal_error_line_and_both_frames_lines() -> None:
    lines = SEGFAULT.read_text().splitlines()
    evidence = diagnose_files([SEGFAULT])[0].evidence
    assert [lines[ev["line"] - 1] for ev in evidence[:3]] == [
        "Fatal Python error: Segmentation fault",
        '  File "/usr/lib/python3.11/ctypes/__init__.py", line 519 in string_at',
        '  File "/home/user/project/segv_step.py", line 10 in read_native']
    assert "exitcode: -11" in evidence[3]["text"]  # torchrun's line for the rank that failed


def test_a_signal_with_no_dump_still_says_there_was_no_python_error() -> None:
    finding = diagnose_files([LOGS / "child_failed_segv.log"])[0]
    assert finding.summary == "Rank 2 failed first (signal SIGSEGV), with no Python error in its log."
    assert finding.fix == load_catalogue()["child_failed"].fix.format(rank=2)


def findings_of(text: str, run: dict | None = None):
    return diagnose_lines(read_text(text, "rank.log"), run)


COMPILING = """\
[default0]:Fatal Python error: Segmentation fault
[default0]:
[default0]:Current thread 0x00007f2a1b4c5740 (most recent call first):
[default0]:  File "/venv/lib/python3.12/site-packages/torch/_inductor/codecache.py", line 2931 in load_pybinding
[default0]:  File "/venv/lib/python3.12/site-packages/torch/_inductor/graph.py", line 2201 in compile_to_module
[default0]:  File "/venv/lib/python3.12/site-packages/torch/_dynamo/eval_frame.py", line 655 in _fn
[default0]:  File "/venv/lib/python3.12/site-packages/mgtutor/training/worker/steps.py", line 88 in train_step
[default0]:  File "/venv/lib/python3.12/site-packages/mgtutor/training/worker/loop.py", line 140 in run
"""


def test_a_crash_while_torch_compile_compiles_the_trainer_says_compile_off() -> None:
    finding = findings_of(COMPILING)[0]
    assert (finding.kind, finding.rank) == ("child_failed", 0)
    assert finding.summary.startswith('Rank 0 failed first (signal SIGSEGV), with "Fatal Python error: Segmentation')
    assert "native code called at torch/_inductor/codecache.py:2931 in load_pybinding." in finding.summary
    assert "re-run `mgtutor train` with `--compile off`" in finding.fix and "report it to PyTorch" in finding.fix


def test_a_crash_in_torch_compile_under_a_users_script_says_without_torch_compile() -> None:
    text = COMPILING.replace("/venv/lib/python3.12/site-packages/mgtutor/training/worker/", "/home/user/")
    finding = findings_of(text)[0]
    assert "(your code: steps.py:88 in train_step)" in finding.summary
    assert "run once without torch.compile" in finding.fix and "--compile off" not in finding.fix


def test_a_crash_in_a_library_names_the_package_to_report_it_to() -> None:
    text = ("Fatal Python error: Bus error\n\nCurrent thread 0x00007f01 (most recent call first):\n"
            '  File "/venv/lib/python3.12/site-packages/numpy/lib/_npyio_impl.py", line 1401 in loadtxt\n'
            '  File "/home/user/data.py", line 12 in load\n')
    finding = findings_of(text)[0]
    assert finding.summary.startswith('A rank failed first (signal SIGBUS), with "Fatal Python error: Bus error"')
    assert "(your code: data.py:12 in load)" in finding.summary
    assert "Report it to numpy with that stack" in finding.fix


def test_a_crash_on_a_thread_without_python_says_where_the_main_thread_was() -> None:
    text = ("Fatal Python error: Segmentation fault\n\n"
            "Thread 0x00007f9d071ce6c0 (most recent call first):\n"
            '  File "/usr/lib/python3.11/threading.py", line 324 in wait\n'
            '  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap\n\n'
            "Thread 0x00007f9dca26eb80 (most recent call first):\n"
            '  File "/home/user/train.py", line 17 in main\n'
            '  File "/home/user/train.py", line 30 in <module>\n')
    finding = findings_of(text, {"ranks": [{"rank": 0, "signal": "SIGSEGV"}]})[0]
    assert finding.summary == (
        'Rank 0 failed first (signal SIGSEGV), with "Fatal Python error: Segmentation fault" in its log: the crash '
        "was in a thread that runs no Python; the main thread was at train.py:17 in main.")
    assert "native code with no Python of its own" in finding.fix


def test_an_abort_dumped_without_all_threads_is_read_as_the_crashing_thread() -> None:
    text = ('Fatal Python error: Aborted\n\nStack (most recent call first):\n'
            '  File "/home/user/run.py", line 5 in <module>\n')
    finding = findings_of(text)[0]
    assert finding.summary.startswith("A rank failed first (signal SIGABRT)")
    assert "native code called at run.py:5 in <module>." in finding.summary


def test_pythons_own_fatal_error_is_not_called_a_crash_in_native_code() -> None:
    text = ("Fatal Python error: _enter_buffered_busy: could not acquire lock for <_io.BufferedWriter "
            "name='<stderr>'> at interpreter shutdown, possibly due to daemon threads\n"
            "Python runtime state: finalizing (tstate=0x0000000000a1b2c3)\n\n"
            "Current thread 0x00007f01 (most recent call first):\n  <no Python frame>\n")
    finding = findings_of(text, {"ranks": [{"rank": 3, "signal": "SIGABRT"}]})[0]
    assert finding.summary.endswith("in its log, and no Python frame on the thread that crashed.")
    assert "Python itself ended the process" in finding.fix and "native code" not in finding.fix


def test_interleaved_ranks_keep_their_own_dumps_and_the_failing_rank_is_named() -> None:
    one = ["Fatal Python error: Segmentation fault", "Current thread 0x1 (most recent call first):",
           '  File "/home/user/a.py", line 3 in step']
    two = ["Fatal Python error: Segmentation fault", "Current thread 0x2 (most recent call first):",
           '  File "/home/user/b.py", line 8 in other']
    text = "".join(f"[default0]:{a}\n[default1]:{b}\n" for a, b in zip(one, two))
    finding = findings_of(text, {"first_failure": {"rank": 1}, "ranks": [{"rank": 1, "signal": "SIGSEGV"}]})[0]
    assert finding.rank == 1 and "native code called at b.py:8 in other." in finding.summary
    assert [(ev["file"], ev["line"]) for ev in finding.evidence] == [("rank.log", 2), ("rank.log", 6),
                                                                      ("ranks/rank1.json", 1)]


def test_a_dump_ends_at_the_first_line_faulthandler_did_not_write() -> None:
    scanner = Scanner(load_catalogue())
    lines = read_text("Fatal Python error: Segmentation fault\nCurrent thread 0x1 (most recent call first):\n"
                      '  File "/home/user/a.py", line 3 in step\nW1202 torchrun: Sending process 12 closing signal\n'
                      '  File "/home/user/later.py", line 9 in noise\n')
    for line in lines[:3]:
        scanner.feed(line)
    assert scanner.wants_every_line  # the dump is still being read
    for line in lines[3:]:
        scanner.feed(line)
    assert not scanner.wants_every_line
    assert [line.text for line in scanner.fatal.first[None].lines] == [lines[1].text, lines[2].text]


def test_the_parser_marks_the_current_thread_and_reads_thread_names_and_line_indices() -> None:
    threads = parse_dump('Thread 0x1 [pt_autograd_0] (most recent call first):\n  File "/x/a.py", line 3 in f\n'
                         'Current thread 0x2 [python] (most recent call first):\n  File "/x/b.py", line 4 in g\n')
    assert [t.current for t in threads] == [False, True]
    assert [(f.file, f.at) for t in threads for f in t.frames] == [("/x/a.py", 1), ("/x/b.py", 3)]


def test_the_code_torch_compile_generates_is_not_the_users() -> None:
    assert not is_user_file("/tmp/torchinductor_user/qz/cqzkq3f2.py") and is_user_file("/home/user/train.py")


# As an H200 rank wrote it when inductor crashed in a cold compile (torch 2.11): the crashing thread was
# native, so faulthandler dumped no thread at all.
NO_THREAD = """\
Fatal Python error: Segmentation fault


Extension modules: numpy._core._multiarray_umath, torch._C, torch._C._dynamo.eval_frame, cuda_utils (total: 4)
"""


def test_a_crash_with_no_python_thread_while_the_trainer_compiled_says_compile_off() -> None:
    """The events say what the dump cannot: the rank's compile began and never ended."""
    from mgtutor.diagnostics.failures.classify import build_findings
    from mgtutor.training.runs.events.writer import encode, parse_event

    def finding(*phases: str):
        scanner = Scanner(load_catalogue())
        for line in read_text(NO_THREAD, "logs/rank0.stderr.log", default_rank=0):
            scanner.feed(line)
        events = [parse_event(encode("step", 0, kind="compile", phase=p, plan="default")) for p in phases]
        run = {"status": "failed", "first_failure": {"rank": 0, "signal": "SIGSEGV"}}
        return build_findings(scanner, run, events)[0]

    compiling = finding("began")
    assert (compiling.kind, compiling.rank) == ("child_failed", 0)
    assert "re-run `mgtutor train` with `--compile off`" in compiling.fix and "report it to PyTorch" in compiling.fix
    for done in (finding("began", "compiled"), finding()):  # it crashed in training, or never compiled
        assert "--compile off" not in done.fix and "native code with no Python of its own" in done.fix
