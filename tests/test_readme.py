"""The README's two commands are the ones CI and users run."""
from __future__ import annotations

import re

from conftest import REPO


def readme_commands() -> list[str]:
    blocks = re.findall(r"```sh\n(.*?)\n```", (REPO / "README.md").read_text(), re.S)
    return [b.strip() for b in blocks]


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one():
    commands = readme_commands()
    assert len(commands) == 2
    start, test = commands
    assert start.endswith("mgtutor") and "pytest" in test
    assert test in (REPO / ".ci" / "run").read_text()
