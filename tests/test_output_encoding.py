"""A standard output that is not UTF-8 never crashes a command: what it cannot encode becomes `?`.

Real processes, each with the output encoding a user's terminal or pipe may have (issue 46, item 11);
Chinese messages (`--lang zh`) make sure there is something to replace. Every command runs for real under
every encoding; the doctor asks torch for its facts (a torch child) under the C locale only, the hardest
(ASCII both ways, surrogateescape): under the other two the same doctor, in its own process under that
encoding, is given torch's facts, so its output path is the real one without a third import of torch."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import mgtutor_argv, no_gpu_env

ENCODINGS = {
    "ascii": {"PYTHONIOENCODING": "ascii"},
    "latin-1": {"PYTHONIOENCODING": "latin-1"},
    "C locale, no coercion": {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0",
                              "PYTHONIOENCODING": ""},
}
TORCH_ASKED_UNDER = "C locale, no coercion"
# `mgtutor ...` with torch's facts given: what versions.gather() returns on this CPU box, without the torch child
GIVEN_FACTS = """import sys
from mgtutor.diagnostics.doctor import versions
versions.gather = lambda *args, **kwargs: {"python": "3.11.2", "torch": "2.11.0+cpu", "cuda": None, "cudnn": None,
    "nccl": None, "distributed": True, "nccl_available": False, "gloo_available": True, "cuda_available": False,
    "device_count": 0, "arch_list": [], "devices": []}
from mgtutor.tui.cli import main
sys.exit(main(sys.argv[1:]))
"""
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
        argv = mgtutor_argv("--lang", "zh", *command)
        if command == ["doctor"] and name != TORCH_ASKED_UNDER:
            argv = [sys.executable, "-c", GIVEN_FACTS, "--lang", "zh", *command]
        done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, timeout=120)
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
