"""Issue 46, items 13 and 14, for `check --fix` and `convert`: a symlinked script is rewritten where it
points (the link stays), a hard-linked one keeps its inode, `convert -o` never writes through a dangling
symlink; a big script is rewritten in chunks exactly as it would be whole, and one nested past LibCST's
limit gets a one-line error."""
from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from mgtutor.diagnostics.check.fix import edits
from mgtutor.diagnostics.check.fix.apply import fix_source
from mgtutor.tui.cli import main as cli_main

FIXTURES = Path(__file__).parent / "data" / "check"
NCCL = textwrap.dedent("""
    import torch.distributed as dist

    dist.init_process_group(backend="nccl")
    """)
FIXED = 'dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")'


def test_fix_through_a_symlink_rewrites_the_file_it_points_to(tmp_path, capsys):
    shared = tmp_path / "shared" / "train.py"
    shared.parent.mkdir()
    shared.write_text(NCCL)
    os.chmod(shared, 0o640)
    link = tmp_path / "train.py"
    link.symlink_to(shared)
    assert cli_main(["check", "--fix", str(link)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(shared)
    assert FIXED in shared.read_text() and oct(shared.stat().st_mode & 0o777) == "0o640"
    assert f"is a link: the file it points to was rewritten, {shared}" in capsys.readouterr().out


def test_fix_of_a_hard_linked_script_keeps_its_inode(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(NCCL)
    other = tmp_path / "same_file.py"
    os.link(script, other)
    inode = script.stat().st_ino
    assert cli_main(["check", "--fix", str(script)]) == 0
    assert script.stat().st_ino == inode and script.stat().st_nlink == 2
    assert FIXED in other.read_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no spare copy left


def test_convert_never_writes_through_a_dangling_symlink(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text((FIXTURES / "convert" / "flat_enumerate.py").read_text())
    elsewhere = tmp_path / "elsewhere" / "planted.py"
    elsewhere.parent.mkdir()
    output = tmp_path / "train_ddp.py"
    output.symlink_to(elsewhere)
    assert cli_main(["convert", str(script), "-o", str(output)]) == 2
    assert "symlink" in capsys.readouterr().err and not elsewhere.exists()
    assert cli_main(["convert", str(script), "-o", str(output), "--force"]) == 0
    assert not output.is_symlink() and "def ddp_setup" in output.read_text() and not elsewhere.exists()


@pytest.mark.parametrize("name", ["flat_enumerate.py", "accel_kwargs.py", "module_loaders.py"])
def test_a_big_script_is_rewritten_in_chunks_exactly_as_whole(monkeypatch, name):
    """Past edits.WHOLE_MODULE_UP_TO characters only the statements an edit touches go through LibCST
    (a 1.9 MB script took minutes and gigabytes); what is written must not change."""
    source = (FIXTURES / "convert" / name).read_text().replace("import torch\n", "import torch\nimport torch.distributed as dist\n"
                                                               "from torch.nn.parallel import DistributedDataParallel as DDP\n", 1)
    source += '\ndist.init_process_group("nccl")\nddp = DDP(torch.nn.Linear(2, 2).cuda())\n'
    whole = fix_source(source, name, unsafe=True)
    monkeypatch.setattr(edits, "WHOLE_MODULE_UP_TO", 0)
    chunked = fix_source(source, name, unsafe=True)
    assert whole.changed and chunked.after == whole.after
    assert [a.rule for a in chunked.applied] == [a.rule for a in whole.applied]


def test_a_script_nested_past_the_rewriters_limit_gets_one_line(tmp_path, capsys):
    script = tmp_path / "deep.py"
    script.write_text(NCCL + "x = " + "[" * 150 + "1" + "]" * 150 + "\n")
    assert cli_main(["check", "--fix", str(script)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nested too deeply for check --fix and convert to rewrite" in err
    assert cli_main(["check", str(script)]) == 0  # reading it still works
