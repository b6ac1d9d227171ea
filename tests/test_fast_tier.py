"""The fast tier stays honest: conftest fails a test without the `integration` mark that starts a
process, whether the error surfaces or the code under test swallows it."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).parent / "conftest.py").read_text()
# The snapshot plugin keeps one temp folder per process; an inner session would remove the outer one's.
INNER = ("-p", "no:cacheprovider", "-p", "no:textual-snapshot")


def test_an_unmarked_test_that_starts_a_process_fails(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_spawn="""
import subprocess, sys
def test_runs_python():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
""")
    result = pytester.runpytest_inprocess(*INNER)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*starts a process (Popen.__init__): mark it integration*"])


def test_a_swallowed_start_still_fails_the_test(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_spawn="""
import os
def test_forks_quietly():
    try:
        os.fork()
    except Exception:
        pass
""")
    result = pytester.runpytest_inprocess(*INNER)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*starts a process (os.fork): mark it integration*"])


def test_no_test_runs_python_code_in_a_child_before_exec() -> None:
    """A test worker has threads (xdist's receiver, the tests' pipe readers), and a child that runs Python
    between fork and exec can deadlock there, holding the pipes the test reads (subprocess's own warning): CI
    once waited 600 s on one. Signals reach children as SIG_DFL without it (conftest.pytest_configure)."""
    word = "preexec" + "_fn"
    tests = Path(__file__).parent
    users = [str(path.relative_to(tests)) for path in tests.rglob("*.py")
             if path.parent.name != "standin" and word in path.read_text(errors="replace")]
    assert users == [], f"{word} in {users}"
