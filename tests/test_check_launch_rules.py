"""The rules about where a script runs and who sets the world: cuda-required, world-set-by-script, and
prints of the launching process before mp.spawn (not findings)."""
from __future__ import annotations

import textwrap

from mgtutor.diagnostics.check.script import check_source


def rules_in(text: str) -> list[str]:
    return [f.rule for f in check_source(textwrap.dedent(text), "t.py")]


def test_parent_prints_in_every_branch_of_main_are_not_findings():
    """The shape of the DDP example that spawns through a helper: `if n_gpus < 8: print(...)` runs in
    the launching process, once."""
    assert "unguarded-print" not in rules_in('''
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp

        def worker(rank, world_size):
            dist.init_process_group("gloo", rank=rank, world_size=world_size)
            dist.destroy_process_group()

        def launch(fn, world_size):
            mp.spawn(fn, args=(world_size,), nprocs=world_size, join=True)

        if __name__ == "__main__":
            n = torch.cuda.device_count()
            if n < 4:
                print(f"needs 4 GPUs, found {n}")
            else:
                print("starting")
                launch(worker, 4)
    ''')


def test_a_print_in_the_spawned_worker_still_is():
    assert "unguarded-print" in rules_in('''
        import torch.distributed as dist
        import torch.multiprocessing as mp

        def worker(rank, world_size):
            dist.init_process_group("gloo", rank=rank, world_size=world_size)
            print("step done")

        def launch(fn, world_size):
            mp.spawn(fn, args=(world_size,), nprocs=world_size)

        if __name__ == "__main__":
            launch(worker, 2)
    ''')


def test_world_size_fixed_by_the_script_is_a_warning():
    found = check_source(textwrap.dedent('''
        import os
        import torch.distributed as dist
        os.environ["RANK"] = "0"
        dist.init_process_group("gloo", world_size=4, rank=0)
    '''), "t.py")
    hits = [f for f in found if f.rule == "world-set-by-script"]
    assert [(f.line, f.severity) for f in hits] == [(4, "warning"), (5, "warning")]
    assert "RANK itself" in hits[0].message and "world_size= and rank=" in hits[1].message


def test_world_from_the_environment_or_another_launcher_is_not():
    assert "world-set-by-script" not in rules_in('''
        import os
        import torch.distributed as dist

        def init(args):
            if "RANK" in os.environ:
                args.rank = int(os.environ["RANK"])
                args.world_size = int(os.environ["WORLD_SIZE"])
            elif "SLURM_PROCID" in os.environ:
                args.rank = int(os.environ["SLURM_PROCID"])
                os.environ["RANK"] = str(args.rank)
            dist.init_process_group("nccl", init_method=args.dist_url, world_size=args.world_size, rank=args.rank)
    ''')
    assert "world-set-by-script" not in rules_in('''
        import torch.distributed as dist
        import torch.multiprocessing as mp

        def worker(rank):
            dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29500", world_size=2, rank=rank)

        mp.spawn(worker, nprocs=2)
    ''')


def test_cuda_required_speaks_beside_nccl_no_fallback():
    """The seed demo's `.cuda()` calls are named even while "nccl" is hard-coded: switching the backend
    alone would not make it run on a CPU machine, so the user hears of both at once."""
    nccl = rules_in('''
        import torch
        import torch.distributed as dist
        dist.init_process_group("nccl")
        model = torch.nn.Linear(2, 2).cuda()
    ''')
    assert "nccl-no-fallback" in nccl and "cuda-required" in nccl
    assert "cuda-required" in rules_in('''
        import torch
        import torch.distributed as dist
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
        model = torch.nn.Linear(2, 2).cuda()
    ''')


def test_cuda_behind_a_test_is_not_required():
    assert "cuda-required" not in rules_in('''
        import os
        import torch
        import torch.distributed as dist
        local_rank = int(os.environ["LOCAL_RANK"])
        dist.init_process_group("gloo")
        use_cuda = torch.cuda.is_available()
        if use_cuda:
            torch.cuda.set_device(local_rank)
        model = torch.nn.Linear(2, 2).to(local_rank if use_cuda else "cpu")
        x = torch.randn(2, 2, device="cuda" if use_cuda else "cpu")
    ''')
