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


def test_readme_says_how_to_install_the_cpu_build_without_cuda_wheels():
    """A CPU-only machine should not download PyTorch's CUDA build (gigabytes it cannot use)."""
    text = (REPO / "README.md").read_text()
    start = text.index("## Install and start")
    section = text[start:text.index("\n## ", start + 1)]
    line = next(line for line in section.splitlines() if "download.pytorch.org/whl/cpu" in line)
    command = line.strip().strip("`")
    assert "pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu" in command
    assert command.endswith("pip install -e .")  # mgtutor after the CPU build, which it then keeps
