"""`check --fix` on the shapes real scripts have (issue 44, the --fix items): the CPU fallback computes the
device once and never copies the rank-as-device bug, a GPU count used as a process count or divisor is
never 0, the rank-0 save writes the unwrapped model and its barrier is one every rank reaches."""
from __future__ import annotations

import ast
import textwrap

from mgtutor.diagnostics.check.fix.apply import fix_source


def fixed(text: str, *rules: str) -> str:
    after = fix_source(textwrap.dedent(text), "t.py", only=set(rules) or None).after
    ast.parse(after)
    assert fix_source(after, "t.py", only=set(rules) or None).after == after  # a second --fix: nothing
    return after


def test_current_gpu_sites_share_one_device_computed_at_the_top_of_the_function():
    after = fixed("""
        import torch
        import torch.distributed as dist

        def train(loader):
            dist.init_process_group("nccl")
            model = torch.nn.Linear(4, 4).cuda()
            for x, y in loader:
                loss = (model(x.cuda(non_blocking=True)) - y.cuda(non_blocking=True)).sum()
        """, "cuda-required")
    assert '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n    dist.init' in after
    assert after.count("is_available()") == 1
    assert "model(x.to(device, non_blocking=True)) - y.to(device, non_blocking=True)" in after


def test_after_set_device_the_current_gpu_is_the_ranks_device():
    after = fixed("""
        import torch
        import torch.distributed as dist

        def worker(gpu, world_size):
            dist.init_process_group("nccl", rank=gpu, world_size=world_size)
            torch.cuda.set_device(gpu)
            model = torch.nn.Linear(4, 4).cuda(gpu)
            x = torch.randn(2, 4).cuda(non_blocking=True)

        torch.multiprocessing.spawn(worker, args=(2,), nprocs=2)
        """, "cuda-required")
    assert 'device = torch.device("cuda", gpu) if torch.cuda.is_available() else torch.device("cpu")' in after
    assert ".to(device)" in after and ".to(device, non_blocking=True)" in after


def test_a_spawn_of_one_process_per_gpu_starts_two_gloo_processes_on_a_cpu():
    after = fixed("""
        import torch
        import torch.distributed as dist
        import torch.multiprocessing as mp

        def main(rank, world_size):
            dist.init_process_group("gloo", rank=rank, world_size=world_size)

        if __name__ == "__main__":
            world_size = torch.cuda.device_count()
            mp.spawn(main, args=(world_size,), nprocs=world_size)
            mp.spawn(main, args=(2,), nprocs=torch.cuda.device_count())
        """, "cuda-required")
    assert "    world_size = torch.cuda.device_count() or 2\n" in after  # two gloo ranks, as `mgtutor run` starts
    assert "nprocs=torch.cuda.device_count() or 2" in after


def test_a_division_by_the_gpu_count_never_divides_by_zero():
    after = fixed("""
        import torch
        import torch.distributed as dist

        dist.init_process_group("nccl")
        batch_size = int(256 / torch.cuda.device_count())
        device = dist.get_rank() % torch.cuda.device_count()
        if torch.cuda.device_count() > 1:
            print("several GPUs")
        """, "cuda-required")
    assert "int(256 / max(1, torch.cuda.device_count()))" in after
    assert "dist.get_rank() % max(1, torch.cuda.device_count())" in after
    assert "if torch.cuda.device_count() > 1:" in after  # a test, not a count


def test_the_global_rank_is_not_copied_into_the_patch():
    after = fixed("""
        import os
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        def demo(rank):
            model = torch.nn.Linear(4, 4).to(rank)
            ddp = DDP(model, device_ids=[rank])
            labels = torch.randn(2, 4).to(rank)

        dist.init_process_group("nccl")
        demo(int(os.environ["RANK"]))
        """, "cuda-required")
    local = 'int(os.environ["LOCAL_RANK"])'
    assert f'device = torch.device("cuda", {local}) if torch.cuda.is_available() else torch.device("cpu")' in after
    assert f"device_ids=[{local}] if torch.cuda.is_available() else None" in after
    assert '"cuda", rank' not in after and "[rank]" not in after


def test_a_saved_state_dict_named_first_is_the_unwrapped_one():
    after = fixed("""
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        dist.init_process_group("gloo")
        model = DDP(torch.nn.Linear(2, 2))
        for epoch in range(2):
            ckp = model.state_dict()
            torch.save(ckp, "checkpoint.pt")
        """, "unguarded-checkpoint")
    assert "    ckp = model.module.state_dict()\n" in after
    assert '== 0:\n        torch.save(ckp, "checkpoint.pt")' in after


def test_the_barrier_after_a_save_is_outside_a_branch_on_the_loss():
    after = fixed("""
        import torch
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        dist.init_process_group("gloo")
        model = DDP(torch.nn.Linear(2, 2))
        best = None
        for epoch in range(3):
            val_loss = evaluate(model)
            if best is None or val_loss < best:
                with open("best.pt", "wb") as f:
                    torch.save(model.module.state_dict(), f)
                best = val_loss
            if epoch % 2 == 0:
                torch.save(model.module.state_dict(), "every_other.pt")
        model.module.load_state_dict(torch.load("best.pt", map_location="cpu"))
        """, "unguarded-checkpoint")
    guard = 'if int(os.environ.get("RANK", "0")) == 0:'
    # the whole `with open(…)`: a rank that opened the file for writing would empty it
    assert (f'    if best is None or val_loss < best:\n        {guard}\n            with open("best.pt", "wb") as f:\n'
            "                torch.save(model.module.state_dict(), f)\n        best = val_loss\n"
            "    if dist.is_initialized():\n        dist.barrier()\n") in after
    # a branch every rank takes alike keeps its barrier
    assert (f'    if epoch % 2 == 0:\n        {guard}\n            torch.save(model.module.state_dict(), '
            '"every_other.pt")\n        if dist.is_initialized():\n            dist.barrier()\n') in after


def test_a_backend_given_as_a_parameters_default_gets_its_fallback_there():
    after = fixed("""
        import torch
        import torch.distributed as dist

        def setup(rank, world_size, backend="nccl"):
            dist.init_process_group(backend=backend, rank=rank, world_size=world_size)
            return torch.device("cuda:{}".format(rank))

        def worker(rank):
            device = setup(rank, 2)

        torch.multiprocessing.spawn(worker, nprocs=2)
        """, "nccl-no-fallback", "cuda-required")
    assert 'def setup(rank, world_size, backend="nccl" if torch.cuda.is_available() else "gloo"):' in after
    assert 'torch.device("cuda:{}".format(rank) if torch.cuda.is_available() else "cpu")' in after


def test_a_backend_a_caller_passes_is_the_callers():
    text = textwrap.dedent("""
        import torch.distributed as dist

        def setup(rank, world_size, backend="nccl"):
            dist.init_process_group(backend=backend, rank=rank, world_size=world_size)

        setup(0, 1, backend="gloo")
        """)
    assert fix_source(text, "t.py", only={"nccl-no-fallback"}).after == text
