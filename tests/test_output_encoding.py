"""A standard output that is not UTF-8 never crashes a command: what it cannot encode becomes `?`.

Real processes, each with the output encoding a user's terminal or pipe may have (issue 46, item 11);
Chinese messages (`--lang zh`) make sure there is something to replace."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import mgtutor_argv, no_gpu_env

ENCODINGS = {
    "ascii": {"PYTHONIOENCODING": "ascii"},
    "latin-1": {"PYTHONIOENCODING": "latin-1"},
    "C locale, no coercion": {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0",
                              "PYTHONIOENCODING": ""},
}
SCRIPT = """import torch
import torch.distributed as dist

dist.init_process_group("nccl")
model = torch.nn.Linear(4, 4).cuda()
torch.save(model.state_dict(), "model.pt")
"""


LOG = """Traceback (most recent call last):
  File "train.py", line 9, in <module>
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB
"""


def _commands(folder: Path) -> list[list[str]]:
    (folder / "train.py").write_text(SCRIPT)
    (folder / "rank0.log").write_text(LOG)
    return [["doctor"], ["check", "train.py"], ["diagnose", "rank0.log"], ["lessons", "list"], ["--help"],
            ["doctor", "--help"]]


@pytest.mark.integration
@pytest.mark.parametrize("name", list(ENCODINGS))
def test_every_command_prints_to_an_output_that_is_not_utf8(name: str, tmp_path: Path) -> None:
    env = {key: value for key, value in no_gpu_env().items() if key not in ("LANGUAGE", "LC_ALL", "LANG")}
    env.update(ENCODINGS[name])
    for command in _commands(tmp_path):
        done = subprocess.run(mgtutor_argv("--lang", "zh", *command), env=env, cwd=tmp_path, capture_output=True,
                              timeout=120)
        said = done.stdout + done.stderr
        assert b"Traceback" not in said and b"UnicodeEncodeError" not in said, (command, said[-2000:])
        assert done.returncode in (0, 1, 2), (command, done.returncode, said[-2000:])
        assert b"?" in done.stdout  # the Chinese it could not encode, replaced
        assert done.stdout.isascii() or name == "latin-1"


def test_the_replacement_keeps_what_the_encoding_can_say() -> None:
    import io

    from mgtutor.tui.cli import replace_unencodable

    raw = io.BytesIO()
    stream = io.TextIOWrapper(raw, encoding="latin-1", errors="strict")
    replace_unencodable(stream)
    stream.write("café — 多卡\n")
    stream.flush()
    assert raw.getvalue() == "café ? ??\n".encode("latin-1")
