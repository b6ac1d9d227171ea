"""`mgtutor check --fix`: each rule's rewrite on a small script, before → after exactly; a second
fix changes nothing; lines the fix does not touch stay byte-identical; the CLI's --diff and --fix."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mgtutor.diagnostics.check.fix.apply import fix_file, fix_source
from mgtutor.diagnostics.check.rules import RULES
from mgtutor.diagnostics.check.script import check_source
from mgtutor.tui.cli import main as cli_main

FIXTURES = Path(__file__).parent / "data" / "check"


def d(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# (rules the fix answers, before, after); each pair written by hand from what the fix should write
CASES = {
    "set-epoch": ({"sampler-no-set-epoch"}, d('''
        from torch.utils.data import DataLoader, DistributedSampler
        import torch.distributed as dist

        dist.init_process_group("gloo")
        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, batch_size=32, sampler=sampler)
        for epoch in range(10):  # epochs
            for x, y in loader:
                train_step(x, y)
        '''), d('''
        from torch.utils.data import DataLoader, DistributedSampler
        import torch.distributed as dist

        dist.init_process_group("gloo")
        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, batch_size=32, sampler=sampler)
        for epoch in range(10):  # epochs
            sampler.set_epoch(epoch)
            for x, y in loader:
                train_step(x, y)
        ''')),
    "set-device": ({"no-set-device"}, d('''
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        # join the job
        dist.init_process_group(backend="nccl")
        model = DDP(torch.nn.Linear(4, 4).cuda())
        '''), d('''
        import os
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        # join the job
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        dist.init_process_group(backend="nccl")
        model = DDP(torch.nn.Linear(4, 4).cuda())
        ''')),
    "map-location": ({"torch-load-no-map-location"}, d('''
        import torch
        import torch.distributed as dist

        dist.init_process_group("nccl")
        model = torch.nn.Linear(4, 4).cuda()
        torch.save(model.state_dict(), "m.pt")
        state = torch.load("m.pt")
        '''), d('''
        import torch
        import torch.distributed as dist

        dist.init_process_group("nccl")
        model = torch.nn.Linear(4, 4).cuda()
        torch.save(model.state_dict(), "m.pt")
        state = torch.load("m.pt", map_location="cpu")
        ''')),
    "torch-amp": ({"deprecated-cuda-amp"}, d('''
        import torch
        from torch.cuda.amp import GradScaler, autocast

        scaler = GradScaler()
        with autocast(dtype=torch.float16):  # mixed precision
            loss = model(x)
        with torch.cuda.amp.autocast():
            loss = model(x)
        '''), d('''
        import torch
        from torch.amp import GradScaler, autocast

        scaler = GradScaler()
        with autocast("cuda", dtype=torch.float16):  # mixed precision
            loss = model(x)
        with torch.autocast("cuda"):
            loss = model(x)
        ''')),
    "local-rank-env": ({"local-rank-argument"}, d('''
        import argparse

        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=0)
        args = parser.parse_args()
        '''), d('''
        import argparse
        import os

        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=os.environ.get("LOCAL_RANK", 0))
        args = parser.parse_args()
        ''')),
    "backend-choice": ({"nccl-no-fallback"}, d('''
        import torch.distributed as dist

        dist.init_process_group(backend='nccl')
        '''), d('''
        import torch
        import torch.distributed as dist

        dist.init_process_group(backend='nccl' if torch.cuda.is_available() else 'gloo')
        ''')),
    "cpu-fallback": ({"cuda-required"}, d('''
        import os

        import torch
        import torch.distributed as dist

        local_rank = int(os.environ["LOCAL_RANK"])
        dist.init_process_group("gloo")
        torch.cuda.set_device(local_rank)
        model = torch.nn.Linear(4, 4).cuda()
        x = torch.randn(2, 4).to(local_rank)
        '''), d('''
        import os

        import torch
        import torch.distributed as dist

        local_rank = int(os.environ["LOCAL_RANK"])
        device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")
        dist.init_process_group("gloo")
        if torch.cuda.is_available():
            torch.cuda.set_device(local_rank)
        model = torch.nn.Linear(4, 4).to(device)
        x = torch.randn(2, 4).to(device)
        ''')),
    "rank-zero": ({"unguarded-print", "unguarded-checkpoint"}, d('''
        import torch
        import torch.distributed as dist


        def train(model):
            dist.init_process_group("gloo")
            rank = dist.get_rank()
            for epoch in range(3):
                loss = run_epoch(model)
                print(f"epoch {epoch} loss {loss:.3f}")
                torch.save(model.state_dict(), f"ckpt-{epoch}.pt")


        train(make_model())
        '''), d('''
        import torch
        import torch.distributed as dist


        def train(model):
            dist.init_process_group("gloo")
            rank = dist.get_rank()
            for epoch in range(3):
                loss = run_epoch(model)
                if rank == 0:
                    print(f"epoch {epoch} loss {loss:.3f}")
                if rank == 0:
                    torch.save(model.state_dict(), f"ckpt-{epoch}.pt")


        train(make_model())
        ''')),
    "download-then-barrier": ({"download-every-rank"}, d('''
        import torch.distributed as dist
        from torchvision import datasets


        def main():
            dist.init_process_group("gloo")
            train = datasets.MNIST("data", train=True, download=True)
            return train


        main()
        '''), d('''
        import os
        import torch.distributed as dist
        from torchvision import datasets


        def main():
            dist.init_process_group("gloo")
            if int(os.environ.get("LOCAL_RANK", "0")) == 0:
                datasets.MNIST("data", train=True, download=True)
            if dist.is_initialized():
                dist.barrier()
            train = datasets.MNIST("data", train=True, download=False)
            return train


        main()
        ''')),
    "timeout": ({"init-no-timeout"}, d('''
        import torch.distributed as dist

        dist.init_process_group("gloo")
        '''), d('''
        import datetime
        import torch.distributed as dist

        dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=5))
        ''')),
    "timeout-one-argument-a-line": ({"init-no-timeout"}, d('''
        import torch.distributed as dist

        dist.init_process_group(
            backend="gloo",
            init_method="env://",
        )
        '''), d('''
        import datetime
        import torch.distributed as dist

        dist.init_process_group(
            backend="gloo",
            init_method="env://",
            timeout=datetime.timedelta(minutes=5),
        )
        ''')),
    "sampler-and-shuffle": ({"sampler-with-shuffle"}, d('''
        from torch.utils.data import DataLoader, DistributedSampler

        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, batch_size=32, sampler=sampler, shuffle=True)  # the pair raises
        '''), d('''
        from torch.utils.data import DataLoader, DistributedSampler

        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, batch_size=32, sampler=sampler)  # the pair raises
        ''')),
    "distributed-sampler": ({"ddp-no-sampler", "sampler-no-set-epoch"}, d('''
        import torch.distributed as dist
        from torch.utils.data import DataLoader

        dist.init_process_group("gloo")
        loader = DataLoader(dataset, batch_size=32, shuffle=True)
        for epoch in range(3):
            for x, y in loader:
                step(x, y)
        '''), d('''
        import torch.distributed as dist
        from torch.utils.data import DataLoader
        from torch.utils.data.distributed import DistributedSampler

        dist.init_process_group("gloo")
        loader = DataLoader(dataset, batch_size=32, sampler=DistributedSampler(dataset, shuffle=True))
        for epoch in range(3):
            loader.sampler.set_epoch(epoch)
            for x, y in loader:
                step(x, y)
        ''')),
    "local-rank-device": ({"rank-as-device"}, d('''
        import torch
        import torch.distributed as dist

        dist.init_process_group("nccl")
        torch.cuda.set_device(dist.get_rank())  # one GPU per rank
        '''), d('''
        import os
        import torch
        import torch.distributed as dist

        dist.init_process_group("nccl")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))  # one GPU per rank
        ''')),
    "destroy-if-initialized": ({"destroy-hides-error"}, d('''
        import torch.distributed as dist

        try:
            main()
        finally:
            dist.destroy_process_group()  # leave the group
        '''), d('''
        import torch.distributed as dist

        try:
            main()
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()  # leave the group
        ''')),
    "world-from-torchrun": ({"world-set-by-script"}, d('''
        import os

        import torch.distributed as dist

        os.environ["WORLD_SIZE"] = "3"
        dist.init_process_group("gloo", world_size=3, rank=0)
        '''), d('''
        import os

        import torch.distributed as dist

        dist.init_process_group("gloo")
        ''')),
}


@pytest.mark.parametrize("name", CASES)
def test_each_fix_writes_exactly_this(name):
    rules, before, after = CASES[name]
    report = fix_source(before, "t.py", unsafe=True, only=rules)
    assert report.after == after
    assert {a.rule for a in report.applied} == rules
    assert not {f.rule for f in check_source(report.after, "t.py")} & rules  # the findings are gone


@pytest.mark.parametrize("name", CASES)
def test_a_second_fix_changes_nothing(name):
    rules, before, _ = CASES[name]
    once = fix_source(before, "t.py", unsafe=True).after
    assert fix_source(once, "t.py", unsafe=True).after == once


def test_every_rewrite_has_a_case_and_unsafe_ones_wait_for_the_flag():
    covered = set().union(*(rules for rules, _, _ in CASES.values()))
    assert {r.id for r in RULES if r.rewrite is not None} <= covered
    assert {r.id for r in RULES if r.safety == "unsafe"} == {"init-no-timeout", "download-every-rank",
                                                              "world-set-by-script", "ddp-no-sampler"}
    _, before, _ = CASES["timeout"]
    report = fix_source(before, "t.py")
    assert not report.changed and [f.rule for f in report.by_hand] == ["init-no-timeout"]
    assert report.by_hand[0].fix_safety == "unsafe"


def test_untouched_lines_keep_their_bytes(tmp_path):
    """Comments, blank lines, odd spacing and CRLF line ends of the code the fix does not touch."""
    source = ("import torch.distributed as dist\r\n\r\n\r\n# a comment   with  spaces\r\n"
              "x  =  [1,\r\n      2]   # aligned\r\n"
              "dist.init_process_group(backend='nccl')\r\n\tpass_through = 1\r\n")
    source = source.replace("\tpass_through = 1\r\n", "y = {'a':1}  #  keep\r\n")
    path = tmp_path / "t.py"
    path.write_bytes(source.encode())
    fix_file(path, write=True)
    after = path.read_bytes().decode()
    assert "dist.init_process_group(backend='nccl' if torch.cuda.is_available() else 'gloo')\r\n" in after
    kept = [line for line in source.split("\r\n") if "init_process_group" not in line]
    new_lines = after.split("\r\n")
    assert all(line in new_lines for line in kept)
    assert after.count("\r\n") == source.count("\r\n") + 1 and "\n" not in after.replace("\r\n", "")


def test_cli_diff_shows_and_fix_writes(tmp_path, capsys):
    path = tmp_path / "demo.py"
    path.write_text((FIXTURES / "cuda-required.bad.py").read_text())
    original = path.read_text()
    assert cli_main(["check", str(path), "--diff"]) == 1  # init-no-timeout is left: unsafe
    out = capsys.readouterr().out
    assert "-    torch.cuda.set_device(local_rank)\n+    if torch.cuda.is_available():\n" in out
    assert "would fix 1 finding(s): cuda-required" in out and "1 more with --unsafe-fixes: init-no-timeout" in out
    assert path.read_text() == original
    assert cli_main(["check", str(path), "--fix", "--unsafe-fixes"]) == 0
    assert "fixed 2 finding(s)" in capsys.readouterr().out
    fixed = path.read_text()
    assert cli_main(["check", str(path), "--fix", "--unsafe-fixes", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["files"][0]["changed"] is False and path.read_text() == fixed


def test_cli_labels_each_finding_with_its_fix_kind(capsys):
    cli_main(["check", str(FIXTURES / "cuda-required.bad.py")])
    out = capsys.readouterr().out
    assert "[safe fix: check --fix]" in out and "[unsafe fix: check --fix --unsafe-fixes]" in out
    cli_main(["check", str(FIXTURES / "cuda-required.bad.py"), "--json"])
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert {f["rule"]: f["fix_safety"] for f in findings} == {"init-no-timeout": "unsafe", "cuda-required": "safe"}


def test_unsafe_flag_alone_is_a_clear_error(capsys):
    assert cli_main(["check", str(FIXTURES / "cuda-required.bad.py"), "--unsafe-fixes"]) == 2
    assert "--unsafe-fixes goes with --diff or --fix" in capsys.readouterr().err


def test_fix_on_a_folder_fixes_each_file(tmp_path, capsys):
    for name in ("seed_demo.py", "multigpu_torchrun_shape.py"):
        (tmp_path / name).write_text((FIXTURES / "fix" / name).read_text())
    assert cli_main(["check", str(tmp_path), "--fix", "--unsafe-fixes"]) == 0
    out = capsys.readouterr().out
    assert out.count("fixed ") == 2
    for name in ("seed_demo.py", "multigpu_torchrun_shape.py"):
        text = (tmp_path / name).read_text()
        compile(text, name, "exec")
        assert "torch.cuda.is_available()" in text
