"""Issue 44's check rules on small scripts in the shapes the issue describes: rank and device identity, who
writes the checkpoint, the random split, DDP on one branch only, MASTER_ADDR, `check SCRIPT` following its
local imports, the false warnings it named, and the `--fix` items (exit status, one device, the unwrapped
state dict, map_location, a per-process checkpoint left alone)."""
from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from mgtutor.diagnostics.check.fix.apply import fix_source
from mgtutor.diagnostics.check.folder import check_script
from mgtutor.diagnostics.check.script import check_source
from mgtutor.tui.cli import main as cli_main


def found(text: str, rule: str | None = None) -> list[tuple[str, int, str]]:
    return [(f.rule, f.line, f.severity) for f in check_source(textwrap.dedent(text), "t.py")
            if rule is None or f.rule == rule]


def lines_of(text: str, rule: str) -> list[int]:
    return [line for _rule, line, _sev in found(text, rule)]


# -- rank-as-device ---------------------------------------------------------------------------------
RANK_AS_DEVICE = {
    "set_device(get_rank())": ("""
        import torch, torch.distributed as dist
        dist.init_process_group("nccl")
        rank = dist.get_rank()
        torch.cuda.set_device(rank)
        """, [5]),
    "device_ids=[rank] (DiT)": ("""
        import torch, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group("nccl")
        rank = dist.get_rank()
        device = rank % torch.cuda.device_count()
        torch.cuda.set_device(device)
        model = DDP(torch.nn.Linear(2, 2).to(device), device_ids=[rank])
        """, [8]),
    "RANK through a parameter": ("""
        import os, torch, torch.distributed as dist
        def demo(rank):
            x = torch.zeros(2).to(rank)
        env = {k: os.environ[k] for k in ("RANK", "LOCAL_RANK")}
        rank = int(env["RANK"])
        torch.accelerator.set_device_index(rank)
        dist.init_process_group()
        demo(rank)
        """, [4, 7]),
}


@pytest.mark.parametrize("case", RANK_AS_DEVICE, ids=list(RANK_AS_DEVICE))
def test_global_rank_as_gpu_index_is_an_error(case):
    text, lines = RANK_AS_DEVICE[case]
    assert lines_of(text, "rank-as-device") == lines
    assert {sev for _r, _l, sev in found(text, "rank-as-device")} == {"error"}


def test_the_spawn_index_and_the_local_rank_are_right():
    spawn = """
        import torch, torch.distributed as dist, torch.multiprocessing as mp
        def worker(rank, world_size):
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
            torch.cuda.set_device(rank)
            model = torch.nn.Linear(2, 2).to(rank)
        if __name__ == "__main__":
            mp.spawn(worker, args=(2,), nprocs=2)
        """
    local = """
        import os, torch, torch.distributed as dist
        rank = int(os.environ["RANK"])
        local_rank = int(os.environ["LOCAL_RANK"])
        dist.init_process_group("nccl")
        torch.cuda.set_device(local_rank)
        x = torch.zeros(2).to(local_rank)
        if rank == 0:
            print(x)
        """
    assert lines_of(spawn, "rank-as-device") == [] and lines_of(local, "rank-as-device") == []


# -- no-local-rank ----------------------------------------------------------------------------------
def test_cuda_and_ddp_without_device_ids_on_a_path_that_never_reads_local_rank():
    text = """
        import os, torch, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        def worker(gpu):
            dist.init_process_group("nccl", init_method="env://", rank=int(os.environ["RANK"]),
                                    world_size=int(os.environ["WORLD_SIZE"]))
            model = torch.nn.Linear(2, 2)
            if gpu is not None:
                torch.cuda.set_device(gpu)
                model = DDP(model.cuda(gpu), device_ids=[gpu])
            else:
                model = DDP(model.cuda())
        worker(None)
        """
    assert lines_of(text, "no-local-rank") == [12]
    pinned = text.replace("            else:\n", "            else:\n                torch.cuda.set_device(int(os.environ['LOCAL_RANK']))\n")
    assert lines_of(pinned, "no-local-rank") == []


def test_ddp_on_the_cpu_without_device_ids_is_right():
    assert lines_of("""
        import torch, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group("gloo")
        model = DDP(torch.nn.Linear(2, 2))
        """, "no-local-rank") == []


# -- device-count-world-size ------------------------------------------------------------------------
def test_device_count_as_world_size_under_a_launcher():
    text = """
        import torch, torch.distributed as dist
        dist.init_process_group("nccl", world_size=torch.cuda.device_count())
        """
    assert lines_of(text, "device-count-world-size") == [3]


def test_device_count_in_a_script_that_spawns_its_processes_is_the_processes_per_node():
    assert lines_of("""
        import torch, torch.distributed as dist, torch.multiprocessing as mp
        def worker(rank, world_size, batch):
            dist.init_process_group("nccl", rank=rank, world_size=world_size)
            batch = batch // world_size
        if __name__ == "__main__":
            world_size = torch.cuda.device_count()
            mp.spawn(worker, args=(world_size, 256), nprocs=world_size)
        """, "device-count-world-size") == []


# -- hardcoded-gpu-list -----------------------------------------------------------------------------
def test_gpus_per_node_constant_and_gpu_lists():
    per_node = """
        import os, torch.distributed as dist
        from mpi4py import MPI
        GPUS_PER_NODE = 8
        def setup():
            os.environ["CUDA_VISIBLE_DEVICES"] = f"{MPI.COMM_WORLD.Get_rank() % GPUS_PER_NODE}"
            dist.init_process_group("nccl")
        """
    listed = """
        import torch.distributed as dist
        gpus = [0, 1, 2, 3]
        dist.init_process_group("nccl")
        """
    from_launcher = """
        import os, torch.distributed as dist
        os.environ["CUDA_VISIBLE_DEVICES"] = os.environ["LOCAL_RANK"]
        dist.init_process_group("nccl")
        """
    assert lines_of(per_node, "hardcoded-gpu-list") == [6]
    assert lines_of(listed, "hardcoded-gpu-list") == [3]
    assert lines_of(from_launcher, "hardcoded-gpu-list") == []


def test_a_single_process_script_may_pick_its_gpu():
    assert lines_of("""
        import os
        os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        import torch
        model = torch.nn.Linear(2, 2).cuda()
        """, "hardcoded-gpu-list") == []


# -- fixed-master-addr ------------------------------------------------------------------------------
def test_master_addr_in_code():
    remote = """
        import os, torch.distributed as dist
        os.environ["MASTER_ADDR"] = "10.57.23.164"
        dist.init_process_group("gloo", rank=0, world_size=1)
        """
    default = remote.replace('os.environ["MASTER_ADDR"] = "10.57.23.164"',
                             'os.environ.setdefault("MASTER_ADDR", "10.57.23.164")')
    assert lines_of(remote, "fixed-master-addr") == [3]
    assert lines_of(default, "fixed-master-addr") == []


# -- writes -----------------------------------------------------------------------------------------
def test_save_on_local_rank_zero_is_one_writer_per_node():
    text = """
        import argparse, torch, torch.distributed as dist
        parser = argparse.ArgumentParser()
        parser.add_argument("--nnodes", type=int, default=1)
        args = parser.parse_args()
        dist.init_process_group("nccl")
        local_rank = dist.get_node_local_rank()
        if local_rank == 0:
            torch.save({}, "ckpt.pt")
        """
    assert found(text, "save-per-node") == [("save-per-node", 9, "warning")]
    global_ = text.replace("if local_rank == 0:", "if dist.get_rank() == 0:")
    assert found(global_, "save-per-node") == []


def test_rank_modulo_gpus_per_node_is_one_writer_per_node():
    assert lines_of("""
        import torch, torch.distributed as dist
        def worker(rank, ngpus_per_node):
            dist.init_process_group("nccl", rank=rank, world_size=2 * ngpus_per_node)
            if rank % ngpus_per_node == 0:
                torch.save({}, "ckpt.pt")
        """, "save-per-node") == [6]


def test_a_download_on_local_rank_zero_is_right():
    assert lines_of("""
        import os, torch.distributed as dist
        from torchvision import datasets
        local_rank = int(os.environ["LOCAL_RANK"])
        dist.init_process_group("gloo")
        if local_rank == 0:
            datasets.MNIST("data", download=True)
        dist.barrier()
        """, "save-per-node") == []


# -- unseeded-random-split --------------------------------------------------------------------------
def test_random_split_seeded_or_not():
    bad = """
        import torch, torch.distributed as dist
        from torch.utils.data import TensorDataset, random_split, Subset
        dist.init_process_group("gloo")
        ds = TensorDataset(torch.arange(10.0))
        perm = torch.randperm(len(ds))
        train = Subset(ds, perm[:8])
        """
    assert lines_of(bad, "unseeded-random-split") == [6]
    seeded = bad.replace('dist.init_process_group("gloo")', 'dist.init_process_group("gloo")\n        torch.manual_seed(0)')
    assert lines_of(seeded, "unseeded-random-split") == []
    per_rank_seed = bad.replace('dist.init_process_group("gloo")',
                                'dist.init_process_group("gloo")\n        torch.manual_seed(1234 + dist.get_rank())')
    assert lines_of(per_rank_seed, "unseeded-random-split") == [7]


def test_random_split_in_a_single_process_script_is_fine():
    assert lines_of("""
        import torch
        from torch.utils.data import TensorDataset, random_split
        train, val = random_split(TensorDataset(torch.arange(10.0)), [8, 2])
        """, "unseeded-random-split") == []


# -- unwrapped-ddp-branch ---------------------------------------------------------------------------
def test_ddp_only_on_the_accelerator_branch():
    text = """
        import torch, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group("gloo")
        model = torch.nn.Linear(2, 2)
        use_accel = torch.accelerator.is_available()
        if not use_accel:
            print("using CPU, this will be slow")
        else:
            model = DDP(model.cuda())
        """
    assert lines_of(text, "unwrapped-ddp-branch") == [8]


def test_ddp_or_not_by_the_distribution_flag_is_right():
    assert lines_of("""
        import torch, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        distributed = dist.is_available() and dist.is_initialized()
        model = torch.nn.Linear(2, 2)
        if distributed:
            model = DDP(model)
        else:
            model = model
        dist.init_process_group("gloo")
        """, "unwrapped-ddp-branch") == []


# -- check SCRIPT follows its local imports ---------------------------------------------------------
def test_check_script_reports_its_helpers(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import torch.distributed as dist
        from helper import step
        dist.init_process_group("gloo")
        step()
        """))
    (tmp_path / "helper.py").write_text(textwrap.dedent("""
        import torch
        def step():
            scaler = torch.cuda.amp.GradScaler()
            return scaler
        """))
    report = check_script(tmp_path / "train.py")
    assert [Path(f).name for f in report.files] == ["train.py", "helper.py"]
    assert ("helper.py", 4) in [(Path(f.file).name, f.line) for f in report.findings if f.rule == "deprecated-cuda-amp"]


def test_check_script_cli_lists_the_helpers_findings(tmp_path, capsys):
    (tmp_path / "train.py").write_text("import helper\n")
    (tmp_path / "helper.py").write_text("import torch\nwith torch.cuda.amp.autocast():\n    pass\n")
    assert cli_main(["check", str(tmp_path / "train.py"), "--brief"]) == 0
    assert "helper.py:2  [deprecated-cuda-amp]" in capsys.readouterr().out


# -- what it said wrongly ---------------------------------------------------------------------------
def test_local_rank_argument_overwritten_by_a_helper_module(tmp_path):
    (tmp_path / "train.py").write_text(textwrap.dedent("""
        import argparse, torch, torch.distributed as dist
        from config import *
        parser = argparse.ArgumentParser()
        parser.add_argument("--local_rank", type=int, default=-1, help="for torch.distributed.launch")
        args = parser.parse_args()
        Config().update(args)
        torch.cuda.set_device(args.local_rank)
        dist.init_process_group("nccl")
        """))
    (tmp_path / "config.py").write_text(textwrap.dedent("""
        import os
        class Config:
            def update(self, args):
                if "LOCAL_RANK" in os.environ:
                    args.local_rank = int(os.environ["LOCAL_RANK"])
        """))
    rules = {f.rule for f in check_script(tmp_path / "train.py").findings}
    assert "local-rank-argument" not in rules and "torch-distributed-launch" not in rules


def test_a_loader_of_the_ranks_own_partition_needs_no_sampler():
    text = """
        import torch, torch.distributed as dist
        from torch.utils.data import DataLoader, TensorDataset
        dist.init_process_group("gloo")
        ds = TensorDataset(torch.arange(10.0))
        part = Partitioner(ds, [0.5, 0.5])
        part = part.use(dist.get_rank())
        loader = DataLoader(part, batch_size=2, shuffle=True)
        """
    assert lines_of(text, "ddp-no-sampler") == []
    assert lines_of(text.replace("DataLoader(part", "DataLoader(ds"), "ddp-no-sampler") == [8]


def test_one_pass_over_a_sampler_needs_no_set_epoch():
    one_pass = """
        import torch, torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler, TensorDataset
        dist.init_process_group("gloo")
        ds = TensorDataset(torch.arange(10.0))
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, sampler=sampler)
        for i, (x,) in enumerate(loader):
            x.sum()
        """
    one_pass = textwrap.dedent(one_pass)
    epochs = one_pass.replace("for i, (x,) in enumerate(loader):\n    x.sum()",
                              "for epoch in range(3):\n    for i, (x,) in enumerate(loader):\n        x.sum()")
    assert epochs != one_pass
    assert lines_of(one_pass, "sampler-no-set-epoch") == []
    assert lines_of(epochs, "sampler-no-set-epoch") == [6]


def test_a_message_each_rank_prints_as_it_exits():
    text = """
        import sys, torch, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        if torch.cuda.device_count() < 2:
            print("Unable to locate 2 GPUs. Exiting.")
            sys.exit()
        dist.init_process_group("nccl")
        model = DDP(torch.nn.Linear(2, 2))
        """
    assert lines_of(text, "unguarded-print") == []


# -- --fix ------------------------------------------------------------------------------------------
def test_fix_exits_zero_when_only_warnings_are_left_by_hand(tmp_path, capsys):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent("""
        import os, torch, torch.distributed as dist
        os.environ["MASTER_ADDR"] = "10.1.1.20"
        dist.init_process_group("nccl")
        """))
    assert cli_main(["check", str(path), "--fix"]) == 0  # nccl-or-gloo written; fixed-master-addr by hand
    assert '"nccl" if torch.cuda.is_available() else "gloo"' in path.read_text()
    assert "fixed-master-addr" in capsys.readouterr().out
    assert cli_main(["check", str(path), "--diff"]) == 1  # still something to do by hand


def test_fix_exits_one_when_an_error_is_left(tmp_path):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent("""
        import torch, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(torch.nn.Linear(2, 2))
        dist.init_process_group("gloo")
        """))
    assert cli_main(["check", str(path), "--fix"]) == 1  # group-used-before-init is an error, fixed by hand


def test_cuda_fallback_computes_the_device_once():
    text = textwrap.dedent("""
        import os
        import torch
        import torch.distributed as dist

        def train(local_rank):
            model = torch.nn.Linear(4, 4).cuda(local_rank)
            x = torch.randn(2, 4).to(local_rank)
            return model(x)

        if __name__ == "__main__":
            local_rank = int(os.environ["LOCAL_RANK"])
            dist.init_process_group("gloo")
            a = torch.zeros(3).to(local_rank)
            b = torch.ones(3).to(local_rank)
            train(local_rank)
        """)
    after = fix_source(text, "t.py", only={"cuda-required"}).after
    once = 'device = torch.device("cuda", local_rank) if torch.cuda.is_available() else torch.device("cpu")'
    assert after.count(once) == 2 and after.count("is_available()") == 2
    assert "torch.nn.Linear(4, 4).to(device)" in after and "torch.zeros(3).to(device)" in after
    ast.parse(after)
    assert fix_source(after, "t.py", only={"cuda-required"}).after == after


def test_rank_zero_save_writes_the_unwrapped_state_dict():
    text = textwrap.dedent("""
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        dist.init_process_group("gloo")
        model = DDP(torch.nn.Linear(2, 2))
        for epoch in range(2):
            torch.save(model.state_dict(), "ckpt.pt")
        """)
    after = fix_source(text, "t.py", only={"unguarded-checkpoint"}).after
    assert "torch.save(model.module.state_dict(), \"ckpt.pt\")" in after and "== 0:" in after


def test_map_location_is_written_where_the_load_goes_into_load_state_dict():
    text = textwrap.dedent("""
        import os
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        dist.init_process_group("gloo")
        model = DDP(torch.nn.Linear(2, 2))
        model.module.load_state_dict(torch.load("ckpt.pt"))
        """)
    report = fix_source(text, "t.py", only={"torch-load-no-map-location"})
    assert 'torch.load("ckpt.pt", map_location="cpu")' in report.after and not report.by_hand


def test_a_per_process_checkpoint_is_never_guarded():
    """Issue 46, item 7: saved and loaded in a helper, one file per process."""
    text = textwrap.dedent("""
        import os
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        def roundtrip(model, path):
            torch.save(model.state_dict(), path)
            model.load_state_dict(torch.load(path, map_location="cpu"))

        dist.init_process_group("gloo")
        model = DDP(torch.nn.Linear(2, 2))
        torch.save(model.state_dict(), f"ckpt_{os.getpid()}.pt")
        roundtrip(model, "shared.pt")
        """)
    assert lines_of(text, "unguarded-checkpoint") == [8]  # the shared path only
    after = fix_source(text, "t.py", unsafe=True).after
    assert '\ntorch.save(model.state_dict(), f"ckpt_{os.getpid()}.pt")' in after  # not under a guard
    assert "dist.barrier()" in after  # the shared file: rank 0 writes it, the others wait before loading


def test_loss_scaling_written_by_hand_is_a_scaler():
    """Seen when `check SCRIPT` followed guided-diffusion's fp16_util.py: it scales the loss itself."""
    text = """
        import torch
        class Trainer:
            def __init__(self, model):
                self.model = model.half()
                self.lg_loss_scale = 20.0
            def backward(self, loss):
                loss_scale = 2 ** self.lg_loss_scale
                (loss * loss_scale).backward()
        """
    assert lines_of(text, "fp16-no-scaler") == []
    assert lines_of(text.replace("(loss * loss_scale).backward()", "loss.backward()"), "fp16-no-scaler") == [5]
