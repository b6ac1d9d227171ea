"""The rules of `mgtutor check`, as data: what each finds, why it matters, the fix as a small
before/after snippet, and the lesson that teaches it. The evidence each looks for is a small
function in match/core.py, match/ranks.py or match/speed.py.

Severities: `error` — the job trains wrong, crashes or hangs; `warning` — very likely a bug or a
deprecated API; `advice` — it works, but slower or harder to run than it needs to be.
Confidence says how the evidence is read: `high` — the call itself is the mistake (an API, an
argument); `medium` — the rule follows the code (guards, helpers in the file or project) and dynamic
code can hide what it looks for; `low` — a habit guessed from names and shapes. A finding whose rule
could not follow the code far enough (a helper it could not read) says so in its caveat, and is
advice whatever the rule's severity.
Tags name the symptom a rule explains (Troubleshoot filters by them): data, device, speed, hang,
output, precision, launch.
"""
from __future__ import annotations

import ast

from dataclasses import dataclass
from typing import Callable

from mgtutor.diagnostics.check.fix import amp as fixes_amp
from mgtutor.diagnostics.check.fix import cuda as fixes_cuda
from mgtutor.diagnostics.check.fix import epoch as fixes_epoch
from mgtutor.diagnostics.check.fix import rewrites as fixes
from mgtutor.diagnostics.check.fix import save as fixes_save
from mgtutor.diagnostics.check.match import core as match
from mgtutor.diagnostics.check.match import cuda, data, identity, lifecycle, paths, ranks, speed
from mgtutor.diagnostics.check.script_model import ScriptModel
from mgtutor.training.foundation.i18n import N_

SEVERITIES = ("error", "warning", "advice")
CONFIDENCES = ("high", "medium", "low")


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    title: str                 # what was found, one line
    why: str                   # why it matters
    fix: str                   # what to do, one line
    before: str                # the fix as code: before …
    after: str                 # … and after
    lesson: str
    tags: tuple[str, ...]
    find: Callable[[ScriptModel], match.Hits]
    confidence: str = "medium"
    # (before, after) written from the user's own code at the finding, instead of the generic pair
    fix_for: Callable[[ast.AST, ScriptModel], tuple[str, str] | None] | None = None
    # the edits `check --fix` writes for a finding (fix/rewrites.py); "safe" keeps what the script does on
    # the machines it already ran on, "unsafe" may change it (applied only with --unsafe-fixes)
    rewrite: Callable[[ast.AST, ScriptModel], fixes.Edits] | None = None
    safety: str = "safe"
    # a finding that may not apply is still fixed where this says the fix is harmless either way
    fix_unsure: Callable[[ast.AST, ScriptModel], bool] | None = None


RULES: tuple[Rule, ...] = (
    Rule("ddp-no-sampler", "error",
         N_("DataLoader without a DistributedSampler in a distributed script: every rank trains on the same batches"),
         N_("Each rank iterates the whole dataset, so N GPUs do N times the work per epoch and see the same samples."),
         N_("give the DataLoader sampler=DistributedSampler(dataset) (and drop shuffle=True)"),
         "loader = DataLoader(ds, batch_size=64, shuffle=True)",
         "sampler = DistributedSampler(ds)\nloader = DataLoader(ds, batch_size=64, sampler=sampler)",
         "05-distributed-sampler", ("data", "speed"), match.no_distributed_sampler,
         rewrite=fixes.distributed_sampler, safety="unsafe"),
    Rule("no-ddp-wrap", "warning",
         N_("init_process_group is called but the model is never wrapped in DistributedDataParallel"),
         N_("Without DDP (or FSDP, or an all_reduce of the gradients) nothing averages gradients across ranks: "
         "each rank trains its own copy and the copies drift apart."),
         N_("wrap the model after moving it to its device (unless this file hands it to code that does)"),
         "model = make_model().to(device)",
         "model = DDP(make_model().to(device), device_ids=[local_rank])",
         "04-ddp-torchrun", ("speed",), match.no_ddp_wrap),
    Rule("sampler-with-shuffle", "error",
         N_("DataLoader gets both a sampler and shuffle=True"),
         N_("PyTorch refuses the pair (ValueError: sampler option is mutually exclusive with shuffle); "
         "the DistributedSampler already shuffles."),
         N_("drop shuffle=True; the sampler shuffles (DistributedSampler(ds, shuffle=True) is its default)"),
         "DataLoader(ds, sampler=sampler, shuffle=True)", "DataLoader(ds, sampler=sampler)",
         "05-distributed-sampler", ("data",), match.sampler_with_shuffle, confidence="high",
         rewrite=fixes.drop_shuffle),
    Rule("sampler-no-set-epoch", "warning",
         N_("DistributedSampler shuffles but sampler.set_epoch(epoch) is never called"),
         N_("The shuffle is seeded with the epoch number; without set_epoch every epoch sees the same order."),
         N_("call sampler.set_epoch(epoch) at the start of each epoch"),
         "for epoch in range(epochs):\n    for x, y in loader:",
         "for epoch in range(epochs):\n    sampler.set_epoch(epoch)\n    for x, y in loader:",
         "05-distributed-sampler", ("data",), match.sampler_without_set_epoch,
         rewrite=fixes_epoch.set_epoch),
    Rule("no-set-device", "warning",
         N_("NCCL is used but no torch.cuda.set_device(local_rank) and no DDP device_ids"),
         N_("Every rank's current CUDA device stays GPU 0: whatever goes to \"cuda\" or .cuda() lands there, and "
         "NCCL may pick the wrong GPU for its communicators and barrier."),
         N_("pin each rank to its GPU right after reading LOCAL_RANK"),
         'dist.init_process_group("nccl")\nmodel = DDP(model.cuda())',
         'local_rank = int(os.environ["LOCAL_RANK"])\ntorch.cuda.set_device(local_rank)\n'
         'dist.init_process_group("nccl")\nmodel = DDP(model.cuda(), device_ids=[local_rank])',
         "04-ddp-torchrun", ("device", "hang"), match.no_set_device,
         rewrite=fixes.set_device_from_local_rank),
    Rule("hardcoded-cuda0", "error",
         N_("a fixed GPU (cuda:0) is hard-coded where each rank's local GPU belongs"),
         N_("Every rank puts its model and data on the same GPU: one GPU busy, the others idle, and NCCL may fail "
         "with 'Duplicate GPU detected'."),
         N_("use the local rank: torch.device('cuda', local_rank)"),
         'model.to("cuda:0")', 'local_rank = int(os.environ["LOCAL_RANK"])\nmodel.to(torch.device("cuda", local_rank))',
         "04-ddp-torchrun", ("device",), match.hardcoded_cuda0),
    Rule("unguarded-checkpoint", "warning",
         N_("checkpoint saved on every rank"),
         N_("All ranks write the same file at once: wasted I/O at best, a corrupt or half-written checkpoint at worst."),
         N_("save on rank 0 only (the DDP weights are the same on every rank)"),
         'torch.save(model.state_dict(), "ckpt.pt")',
         'if dist.get_rank() == 0:\n    torch.save(model.module.state_dict(), "ckpt.pt")',
         "06-rank0-checkpoints", ("output",), ranks.unguarded_checkpoint,
         rewrite=fixes_save.rank_zero_save),
    Rule("unguarded-print", "advice",
         N_("print/logging runs on every rank"),
         N_("Each message appears once per GPU, interleaved; with 8 GPUs the log is 8 times longer and harder to read."),
         N_("print on rank 0 only, or prefix messages with the rank"),
         'print(f"epoch {epoch} loss {loss:.3f}")',
         'if rank == 0:\n    print(f"epoch {epoch} loss {loss:.3f}")',
         "06-rank0-checkpoints", ("output",), ranks.unguarded_print, confidence="low",
         rewrite=ranks.rank_zero_prints),
    Rule("unguarded-tracker", "warning",
         N_("TensorBoard/W&B logger created on every rank"),
         N_("Each rank opens its own writer: duplicate runs, clashing event files, N copies of every curve."),
         N_("create the writer on rank 0 only"),
         "writer = SummaryWriter(log_dir)",
         "writer = SummaryWriter(log_dir) if rank == 0 else None",
         "06-rank0-checkpoints", ("output",), ranks.unguarded_tracker),
    Rule("collective-in-rank-branch", "error",
         N_("a collective runs inside a rank-only branch"),
         N_("Collectives (barrier, all_reduce, …) need every rank; the ranks that skip the branch never join, so "
         "the job hangs until the NCCL timeout."),
         N_("call the collective on every rank, outside the rank check"),
         "if rank == 0:\n    save(model)\n    dist.barrier()",
         "if rank == 0:\n    save(model)\ndist.barrier()",
         "14-when-it-goes-wrong", ("hang",), ranks.collective_in_rank_branch),
    Rule("dataparallel", "advice",
         N_("nn.DataParallel: one process drives every GPU"),
         N_("DataParallel copies the model each step and gathers outputs on GPU 0 (the GIL-bound bottleneck); "
         "DDP with one process per GPU is faster even on a single machine."),
         N_("use DistributedDataParallel launched with torchrun"),
         "model = nn.DataParallel(model).cuda()",
         "model = DDP(model.to(local_rank), device_ids=[local_rank])  # torchrun --nproc-per-node N",
         "03-dataparallel", ("speed", "device"), match.dataparallel, confidence="high"),
    Rule("torch-distributed-launch", "warning",
         N_("torch.distributed.launch is deprecated"),
         N_("torchrun replaces it: it sets RANK/LOCAL_RANK/WORLD_SIZE in the environment and can restart failed workers."),
         N_("launch with torchrun (python -m torch.distributed.run)"),
         "python -m torch.distributed.launch --nproc_per_node 4 train.py",
         "torchrun --nproc-per-node 4 train.py",
         "04-ddp-torchrun", ("launch",), match.distributed_launch, confidence="high"),
    Rule("local-rank-argument", "warning",
         N_("the local rank comes from a --local_rank argument, which torchrun does not pass"),
         N_("torchrun sets LOCAL_RANK in the environment; the argument keeps its default, so every rank picks the "
         "same GPU (or the script thinks it is not distributed)."),
         N_("read the environment variable"),
         'parser.add_argument("--local_rank", type=int, default=-1)',
         'local_rank = int(os.environ["LOCAL_RANK"])',
         "04-ddp-torchrun", ("launch", "device"), match.local_rank_argument,
         rewrite=fixes.local_rank_from_env),
    Rule("spawn-master-port", "advice",
         N_("mp.spawn with a hand-set MASTER_PORT"),
         N_("A fixed port collides with any other job on the machine (EADDRINUSE); torchrun picks the rendezvous "
         "for you and starts one process per GPU."),
         N_("drop mp.spawn and the env setup; launch with torchrun"),
         'os.environ["MASTER_PORT"] = "12355"\nmp.spawn(train, nprocs=n)',
         "# torchrun --nproc-per-node n train.py\ndist.init_process_group()",
         "04-ddp-torchrun", ("launch",), match.spawn_master_port, confidence="high"),
    Rule("deprecated-cuda-amp", "warning",
         N_("torch.cuda.amp is deprecated"),
         N_("torch.cuda.amp.autocast/GradScaler print FutureWarnings and will go; torch.amp takes the device as an "
         "argument."),
         N_("use torch.amp with the device type"),
         "with torch.cuda.amp.autocast():\nscaler = torch.cuda.amp.GradScaler()",
         'with torch.autocast("cuda", dtype=torch.float16):\nscaler = torch.amp.GradScaler("cuda")',
         "10-mixed-precision", ("precision",), speed.deprecated_cuda_amp, confidence="high",
         rewrite=fixes_amp.torch_amp),
    Rule("fp16-no-scaler", "warning",
         N_("float16 training without a GradScaler"),
         N_("float16 gradients underflow to zero without loss scaling, so training silently stalls; bfloat16 needs "
         "no scaler."),
         N_("add a GradScaler, or use dtype=torch.bfloat16"),
         "with torch.autocast('cuda', dtype=torch.float16):\n    loss = model(x)\nloss.backward()",
         "scaler = torch.amp.GradScaler('cuda')\n...\nscaler.scale(loss).backward()\nscaler.step(opt); scaler.update()",
         "10-mixed-precision", ("precision",), speed.fp16_without_scaler),
    Rule("find-unused-parameters", "advice",
         N_("find_unused_parameters=True"),
         N_("DDP then walks the autograd graph after every forward to find unused parameters: slower steps."),
         N_("leave it off unless DDP's error asks for it (make every output reach the loss instead)"),
         "DDP(model, device_ids=[r], find_unused_parameters=True)", "DDP(model, device_ids=[r])",
         "04-ddp-torchrun", ("speed",), speed.find_unused_parameters, confidence="high"),
    Rule("sync-every-step", "advice",
         N_(".item() on every training step"),
         N_("Each .item() (or print of a tensor) waits for the GPU to finish: the CPU cannot queue the next step, "
         "and the GPU idles between steps."),
         N_("keep the running loss on the GPU and read it every N steps"),
         "total += loss.item()",
         "total += loss.detach()\nif step % 50 == 0:\n    print(total.item() / (step + 1))",
         "12-watching-a-run", ("speed",), speed.sync_every_step, confidence="low"),
    Rule("nccl-no-fallback", "advice",
         N_("backend 'nccl' is hard-coded"),
         N_("NCCL needs CUDA GPUs: on a CPU-only machine (a laptop, a CI runner) init_process_group fails instead "
         "of falling back to gloo."),
         N_("choose the backend from the hardware"),
         'dist.init_process_group("nccl")',
         'dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")',
         "13-nccl-topology", ("device", "launch"), match.nccl_without_fallback, confidence="high",
         rewrite=fixes.nccl_or_gloo),
    Rule("init-no-timeout", "advice",
         N_("init_process_group without a timeout"),
         N_("The default is 10 minutes on NCCL and 30 on gloo: a missing rank or a stuck collective hangs that "
         "long before any error appears."),
         N_("pass a timeout that fits your job"),
         'dist.init_process_group("nccl")',
         'dist.init_process_group("nccl", timeout=datetime.timedelta(minutes=5))',
         "14-when-it-goes-wrong", ("hang",), match.init_without_timeout, confidence="high",
         fix_for=match.with_timeout,
         rewrite=fixes.init_timeout, safety="unsafe"),
    Rule("dataloader-slow", "advice",
         N_("DataLoader reads from disk in the training process"),
         N_("With num_workers=0 the training process itself decodes every batch while the GPU waits; without "
         "pin_memory the copy to the GPU cannot overlap compute."),
         N_("load in worker processes and pin host memory"),
         "DataLoader(ds, batch_size=64, sampler=sampler)",
         "DataLoader(ds, batch_size=64, sampler=sampler, num_workers=4, pin_memory=True,\n"
         "           persistent_workers=True)",
         "09-data-loading", ("speed", "data"), speed.slow_dataloader, confidence="low"),
    Rule("torch-load-no-map-location", "warning",
         N_("torch.load without map_location in a distributed script"),
         N_("torch.load puts every tensor back on the device it was saved from: each rank loads the checkpoint onto "
         "the GPU that saved it (GPU 0), so GPU 0 holds N copies and can run out of memory while the ranks fight "
         "over it."),
         N_("load to the CPU (or to this rank's own GPU) with map_location"),
         "snapshot = torch.load(path)",
         'snapshot = torch.load(path, map_location="cpu")  # or f"cuda:{local_rank}"',
         "06-rank0-checkpoints", ("device",), data.load_without_map_location,
         rewrite=fixes.map_location_cpu, fix_unsure=data.straight_into_load_state_dict),
    Rule("download-every-rank", "warning",
         N_("a data set is downloaded (download=True) on every rank"),
         N_("Every rank downloads and unpacks the same archive into the same folder at once: the writes race (a "
         "corrupt or half-extracted archive), the server sees N downloads, and without internet every rank fails "
         "with a network error that reads like a rendezvous problem."),
         N_("download once beforehand, or on one rank per node behind a barrier; then build it with download=False"),
         "train = datasets.CIFAR10(root, train=True, download=True)",
         "if local_rank == 0:\n    datasets.CIFAR10(root, train=True, download=True)\ndist.barrier()\n"
         "train = datasets.CIFAR10(root, train=True, download=False)",
         "09-data-loading", ("data", "launch"), data.download_every_rank,
         rewrite=fixes.download_on_local_rank_zero, safety="unsafe"),
    Rule("cuda-required", "advice",
         N_("the script needs CUDA and has no CPU fallback"),
         N_("set_device, .cuda(), .to(local_rank) and device_ids fail on a machine without a GPU whatever backend the "
         "launcher chose: switching to gloo alone does not make the script run there."),
         N_("keep the GPU path and add the CPU one: torch.cuda.is_available() decides"),
         "torch.cuda.set_device(local_rank)\nmodel = DDP(model.cuda(), device_ids=[local_rank])",
         "if torch.cuda.is_available():\n    torch.cuda.set_device(local_rank)\n"
         "model = DDP(model.to(\"cuda\" if torch.cuda.is_available() else \"cpu\"),\n"
         "            device_ids=[local_rank] if torch.cuda.is_available() else None)",
         "04-ddp-torchrun", ("device", "launch"), cuda.cuda_required, rewrite=fixes_cuda.cuda_fallback),
    Rule("world-set-by-script", "warning",
         N_("the script sets the world size or rank that torchrun already set"),
         N_("torchrun gives every rank WORLD_SIZE, RANK and LOCAL_RANK; a script that overrides them (or passes its "
         "own world_size=/rank= to init_process_group) makes the ranks disagree: init_process_group waits for "
         "ranks that never come, or two processes claim the same rank."),
         N_("let torchrun's environment decide: drop the assignment or the keywords"),
         'os.environ["WORLD_SIZE"] = "3"\ndist.init_process_group("gloo", world_size=3, rank=args.rank)',
         'dist.init_process_group("gloo")  # WORLD_SIZE and RANK come from torchrun',
         "14-when-it-goes-wrong", ("hang", "launch"), cuda.world_set_by_script, confidence="high",
         rewrite=cuda.drop_world_setting, safety="unsafe"),
    Rule("rank-as-device", "error",
         N_("the global rank is used as the GPU index"),
         N_("RANK counts the processes of the whole job; a node's GPUs are numbered from 0 again. On one node the "
         "two agree, on the second node rank 8 asks for GPU 8 (invalid device ordinal) or two ranks share a GPU."),
         N_("index the GPU by the local rank (LOCAL_RANK), keep the global rank for data and rank-0 work"),
         "rank = dist.get_rank()\nmodel = DDP(model.to(rank), device_ids=[rank])",
         'local_rank = int(os.environ["LOCAL_RANK"])\nmodel = DDP(model.to(local_rank), device_ids=[local_rank])',
         "04-ddp-torchrun", ("device",), identity.rank_as_device, confidence="high",
         rewrite=fixes_cuda.local_rank_device),
    Rule("no-local-rank", "error",
         N_("the model goes to the current GPU and DDP gets no device_ids on a path that never reads LOCAL_RANK"),
         N_("Without set_device(local_rank) the current GPU of every process is GPU 0: .cuda() puts every rank's "
         "model there, and DDP without device_ids keeps it there."),
         N_("read LOCAL_RANK, pin the process to that GPU and pass it to DDP"),
         "model.cuda()\nmodel = DDP(model)",
         'local_rank = int(os.environ["LOCAL_RANK"])\ntorch.cuda.set_device(local_rank)\n'
         "model.cuda()\nmodel = DDP(model, device_ids=[local_rank])",
         "04-ddp-torchrun", ("device",), identity.no_local_rank),
    Rule("device-count-world-size", "warning",
         N_("torch.cuda.device_count() is used as the world size"),
         N_("device_count() is the number of GPUs of this node; the job may span several nodes (or use fewer GPUs "
         "than the node has). Batch splits, loss averages and world_size= then use the wrong count."),
         N_("ask the process group: dist.get_world_size()"),
         "nprocs = torch.cuda.device_count()\nloss = reduce_sum(loss) / nprocs",
         "loss = reduce_sum(loss) / dist.get_world_size()",
         "04-ddp-torchrun", ("data", "launch"), identity.device_count_world_size),
    Rule("hardcoded-gpu-list", "warning",
         N_("the script fixes which GPUs it uses"),
         N_("A launcher or scheduler gives the job its GPUs (CUDA_VISIBLE_DEVICES, one local rank per GPU); a list "
         "written in the code overrides it, asks for GPUs a smaller machine lacks and collides with other jobs."),
         N_("drop the list: let the launcher choose the GPUs, and each process use torch.device('cuda', local_rank)"),
         'os.environ["CUDA_VISIBLE_DEVICES"] = "0,1,2,3"',
         "# CUDA_VISIBLE_DEVICES=0,1,2,3 torchrun --nproc-per-node 4 train.py",
         "04-ddp-torchrun", ("device", "launch"), identity.hardcoded_gpu_list),
    Rule("fixed-master-addr", "warning",
         N_("MASTER_ADDR is set to a fixed address in the code"),
         N_("The rendezvous host is a property of the run, not the script: on another cluster (or another node of "
         "this one) the ranks look for rank 0 at an address where it is not, and wait until the timeout."),
         N_("take it from the environment (torchrun --master-addr / --rdzv-endpoint sets it)"),
         'os.environ["MASTER_ADDR"] = "10.1.1.20"',
         'os.environ.setdefault("MASTER_ADDR", "localhost")  # torchrun --rdzv-endpoint overrides',
         "14-when-it-goes-wrong", ("launch", "hang"), identity.fixed_master_addr, confidence="high"),
    Rule("save-guard-all-ranks", "warning",
         N_("the save guard is true on every rank under torchrun"),
         N_("The guard tests the flag that starts mp.spawn; launched by torchrun that flag is off, so the guard "
         "passes on every rank and all of them write the same file at once."),
         N_("guard the save with the global rank alone: dist.get_rank() == 0"),
         "if not args.multiprocessing_distributed or args.rank % ngpus_per_node == 0:\n    save_checkpoint(state)",
         "if not dist.is_initialized() or dist.get_rank() == 0:\n    save_checkpoint(state)",
         "06-rank0-checkpoints", ("output",), paths.save_guard_all_ranks),
    Rule("save-per-node", "warning",
         N_("the checkpoint is written by the first process of every node"),
         N_("local_rank == 0 (or rank % gpus_per_node == 0) is true once per node: on several nodes sharing a "
         "file system, each node writes the same path at once."),
         N_("save on global rank 0"),
         "if local_rank == 0:\n    torch.save(model.module.state_dict(), path)",
         "if dist.get_rank() == 0:\n    torch.save(model.module.state_dict(), path)",
         "06-rank0-checkpoints", ("output",), paths.save_per_node),
    Rule("unseeded-random-split", "warning",
         N_("random_split without a seeded generator in a distributed script"),
         N_("Each process draws its own random split: the ranks train on different training sets, and samples one "
         "rank trains on are another rank's evaluation set."),
         N_("split with a generator seeded the same on every rank"),
         "train, val = random_split(ds, [n_train, n_val])",
         "train, val = random_split(ds, [n_train, n_val], generator=torch.Generator().manual_seed(42))",
         "05-distributed-sampler", ("data",), paths.unseeded_random_split),
    Rule("unwrapped-ddp-branch", "warning",
         N_("the model is wrapped in DDP on one branch of a device test but not the other"),
         N_("On the branch without DDP (often the CPU one) nothing averages gradients: every rank trains its own "
         "copy and the copies drift apart, with no error."),
         N_("wrap the model on every branch: DDP(model) on the CPU (gloo) too, with device_ids only on a GPU"),
         "if torch.cuda.is_available():\n    model = DDP(model.cuda(), device_ids=[local_rank])",
         "if torch.cuda.is_available():\n    model = DDP(model.cuda(), device_ids=[local_rank])\n"
         "else:\n    model = DDP(model)",
         "04-ddp-torchrun", ("speed", "data"), paths.unwrapped_ddp_branch),
    Rule("init-in-device-branch", "warning",
         N_("the process group is joined only on the GPU branch"),
         N_("A run without a GPU (gloo on CPUs, a laptop, CI) takes the other branch, never joins the group, and "
            "fails at its first DistributedSampler, DDP wrap or collective."),
         N_("join the group on every path: pick the backend from the device, after the branch"),
         "if use_cuda:\n    dist.init_process_group(\"nccl\")\n    device = torch.device(\"cuda\", local_rank)",
         "backend = \"nccl\" if use_cuda else \"gloo\"\ndist.init_process_group(backend)",
         "04-ddp-torchrun", ("launch", "device"), lifecycle.init_in_device_branch),
    Rule("group-used-before-init", "error",
         N_("a DistributedSampler or DDP is made before the process group exists"),
         N_("Both ask the default process group for the world size and rank when they are made; made at import "
            "time, before the line that joins the group runs, they raise \"Default process group has not been "
            "initialized\"."),
         N_("join the group first: move the setup call above them (or build them after it)"),
         "sampler = DistributedSampler(ds)  # module level\n...\nif __name__ == \"__main__\":\n    ddp_setup()",
         "ddp_setup()\nsampler = DistributedSampler(ds)",
         "05-distributed-sampler", ("launch", "data"), lifecycle.group_used_before_init, confidence="high"),
    Rule("destroy-hides-error", "warning",
         N_("destroy_process_group() in a cleanup block without dist.is_initialized()"),
         N_("When the script fails before it joined the group (a bad argument, a missing file), the cleanup "
            "raises its own error about the missing group and the real one is buried under it."),
         N_("destroy the group only if it was made"),
         "finally:\n    dist.destroy_process_group()",
         "finally:\n    if dist.is_initialized():\n        dist.destroy_process_group()",
         "14-when-it-goes-wrong", ("launch",), lifecycle.destroy_hides_error, confidence="high",
         rewrite=lifecycle.destroy_if_initialized),
)

RULES_BY_ID = {rule.id: rule for rule in RULES}

# Troubleshoot's symptoms and the tags of the rules that can explain them.
SYMPTOM_TAGS: dict[str, tuple[str, ...]] = {
    "one-gpu-busy": ("device",),
    "same-data": ("data",),
    "no-speedup": ("speed", "data"),
    "hang": ("hang",),
}
