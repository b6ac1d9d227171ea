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
