"""`mgtutor check` following the code a little further before it speaks: rank helpers in the same
file or the project, a replaced print, the parent of mp.spawn, data held in memory, and the two
rules for loading (torch.load without map_location) and downloading (download=True on every rank).

Each script in data/check/follow reproduces a pattern seen in public training code; the table says
which warning/error findings it must give (exactly those) and which rules must stay silent or only
advise."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mgtutor.diagnostics.check.folder import check_folder
from mgtutor.diagnostics.check.rules import RULES_BY_ID
from mgtutor.diagnostics.check.script import check_file, check_source

FOLLOW = Path(__file__).parent / "data" / "check" / "follow"

# script: (findings it must give as {rule: severity}, rules that must not appear at all)
CASES: dict[str, tuple[dict[str, str], set[str]]] = {
    "helper_env/train.py": ({}, {"local-rank-argument", "unguarded-print", "unguarded-checkpoint"}),
    "helper_pkg/train.py": ({}, {"local-rank-argument"}),
    "helper_same_file.py": ({}, {"local-rank-argument"}),
    "helper_unread.py": ({"local-rank-argument": "advice", "unguarded-print": "advice"}, set()),
    "local_rank_only.py": ({"local-rank-argument": "warning"}, set()),
    "print_module_override.py": ({}, {"unguarded-print"}),
    "print_builtins_same_file.py": ({}, {"unguarded-print"}),
    "spawn_parent.py": ({"unguarded-print": "advice"}, {"download-every-rank"}),
    "in_memory_loaders.py": ({"dataloader-slow": "advice"}, set()),
    "tokenized_accelerate.py": ({}, {"dataloader-slow", "download-every-rank"}),
    "load_pretrained_no_save.py": ({"torch-load-no-map-location": "advice"}, set()),
    "load_choices.py": ({}, {"torch-load-no-map-location"}),
    "download_guarded.py": ({}, {"download-every-rank"}),
    "download_single_process.py": ({}, {"download-every-rank", "torch-load-no-map-location"}),
    "download_accelerate_every_rank.py": ({"download-every-rank": "warning"}, set()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pattern_gives_exactly_its_findings(name):
    must, must_not = CASES[name]
    findings = check_file(FOLLOW / name)
    got = {f.rule: f.severity for f in findings}
    assert {rule: got.get(rule) for rule in must} == must
    assert not must_not & set(got), [f"{f.rule}:{f.line}" for f in findings if f.rule in must_not]
    loud = {f.rule for f in findings if f.severity != "advice"}
    assert loud == {rule for rule, severity in must.items() if severity != "advice"}


def test_every_finding_that_may_not_apply_is_low_confidence_advice_and_says_why():
    findings = [f for name in CASES for f in check_file(FOLLOW / name)]
    unsure = [f for f in findings if f.caveat]
    assert len(unsure) >= 3
    assert all(f.severity == "advice" and f.confidence == "low" for f in unsure)
    assert all(f.confidence == RULES_BY_ID[f.rule].confidence for f in findings if not f.caveat)


def test_an_unread_helper_is_named_in_the_caveat():
    hit = next(f for f in check_file(FOLLOW / "helper_unread.py") if f.rule == "local-rank-argument")
    assert "training_toolkit.dist.init_distributed_mode() (line 14)" in hit.caveat and "not read" in hit.caveat


def test_the_same_script_without_its_helper_module_only_advises(tmp_path):
    """train.py alone (utils.py not beside it): the helper cannot be read, so no warning."""
    shutil.copy(FOLLOW / "helper_env" / "train.py", tmp_path / "train.py")
    found = {f.rule: f for f in check_file(tmp_path / "train.py")}
    assert found["local-rank-argument"].severity == "advice"
    assert "utils.init_distributed_mode() (line 15)" in found["local-rank-argument"].caveat
    assert "local-rank-argument" not in {f.rule for f in check_file(FOLLOW / "helper_env" / "train.py")}


def test_a_helper_that_does_not_read_the_environment_keeps_the_warning(tmp_path):
    shutil.copytree(FOLLOW / "helper_env", tmp_path / "p")
    utils = tmp_path / "p" / "utils.py"
    utils.write_text(utils.read_text().replace('int(os.environ["RANK"])', "args.rank")
                     .replace('int(os.environ["WORLD_SIZE"])', "args.world_size")
                     .replace('int(os.environ["LOCAL_RANK"])', "args.local_rank"))
    found = {f.rule: f.severity for f in check_file(tmp_path / "p" / "train.py")}
    assert found["local-rank-argument"] == "warning"


def test_spawn_parent_prints_are_not_counted_only_the_workers():
    hit = next(f for f in check_file(FOLLOW / "spawn_parent.py") if f.rule == "unguarded-print")
    assert hit.code == 'print(f"epoch {epoch} done")' and "more" not in hit.message


def test_only_the_loader_over_files_is_slow():
    lines = [f.code for f in check_file(FOLLOW / "in_memory_loaders.py") if f.rule == "dataloader-slow"]
    assert lines == ["images = DataLoader(photos, batch_size=64, sampler=samplers[2])"]


def test_the_new_rules_on_their_snippets_name_the_line():
    snippets = FOLLOW.parent
    load = [f for f in check_file(snippets / "torch-load-no-map-location.bad.py") if f.rule == "torch-load-no-map-location"]
    assert [(f.severity, f.code) for f in load] == [("warning", "snapshot = torch.load(snapshot_path)")]
    download = [f for f in check_file(snippets / "download-every-rank.bad.py") if f.rule == "download-every-rank"]
    assert [f.severity for f in download] == ["warning"] and "download=True" in download[0].code


def test_set_epoch_in_the_engine_module_counts():
    findings = check_file(FOLLOW / "engine_set_epoch" / "main.py")
    assert "sampler-no-set-epoch" not in {f.rule for f in findings}


def test_a_loader_factory_without_set_epoch_only_advises():
    hit = [f for f in check_file(FOLLOW / "loader_factory.py") if f.rule == "sampler-no-set-epoch"]
    assert [(f.severity, f.confidence) for f in hit] == [("advice", "low")]
    assert "create_loader() hands what it builds to its caller" in hit[0].caveat


@pytest.mark.parametrize("source, rule", [
    ('import torch\ndef f():\n    """run with python -m torch.distributed.launch ..."""\n', "torch-distributed-launch"),
    ("import torch\ntry:\n    s = torch.amp.GradScaler('cuda')\nexcept AttributeError:\n"
     "    s = torch.cuda.amp.GradScaler()\n", "deprecated-cuda-amp"),
    ("from lightning.fabric import Fabric\nfrom torchvision.datasets import CelebA\n"
     "fabric = Fabric(devices=1)\nfabric.launch()\nds = CelebA('data', download=True)\n", "download-every-rank"),
])
def test_what_looks_like_a_mistake_but_is_not(source, rule):
    assert rule not in {f.rule for f in check_source(source, "t.py")}


def test_fabric_on_every_device_downloading_is_flagged():
    source = ("import lightning as L\nfrom torchvision.datasets import CelebA\n"
              "fabric = L.Fabric()\nfabric.launch()\nds = CelebA('data', download=True)\n")
    assert [f.line for f in check_source(source, "t.py") if f.rule == "download-every-rank"] == [5]


def test_a_loader_factory_called_in_the_same_file_keeps_the_warning():
    source = ("from torch.utils.data import DataLoader, DistributedSampler\nimport torch.distributed as dist\n"
              "def prepare(ds):\n    return DataLoader(ds, sampler=DistributedSampler(ds))\n"
              "dist.init_process_group('gloo')\nfor epoch in range(2):\n    for x in prepare(ds):\n        pass\n")
    assert [(f.severity, f.line) for f in check_source(source, "t.py") if f.rule == "sampler-no-set-epoch"] == \
        [("warning", 4)]


@pytest.mark.parametrize("source, rule", [
    ("import torch\ndef train_one_epoch(model, x, opt, loss_scaler):\n    with torch.autocast('cuda'):\n"
     "        loss = model(x)\n    if loss_scaler is None:\n        loss.backward()\n    else:\n"
     "        loss_scaler(loss, opt)\n", "fp16-no-scaler"),
    ("import torch.distributed as dist\nimport cherry\ndist.init_process_group('gloo')\n"
     "opt = cherry.optim.Distributed(model.parameters(), opt=base)\nloss.backward()\nopt.step()\n", "no-ddp-wrap"),
])
def test_work_done_by_an_object_handed_in_is_not_missing(source, rule):
    assert rule not in {f.rule for f in check_source(source, "t.py")}


def test_a_download_inside_a_project_helper_is_found_at_the_call_every_rank_makes():
    hits = [f for f in check_file(FOLLOW / "dataset_helper" / "main.py") if f.rule == "download-every-rank"]
    assert [(f.severity, f.line) for f in hits] == [("warning", 12)]
    assert "data_sets.build_dataset() (line 12) downloads a data set with download=True (data_sets.py, line 7)" \
        in hits[0].message


def test_the_single_process_branch_is_not_every_rank():
    source = ("import os, torch, torch.distributed as dist\nfrom torchvision import datasets\n"
              "ddp = int(os.environ.get('RANK', -1)) != -1\n"
              "if ddp:\n    dist.init_process_group('nccl')\n    device = f'cuda:{int(os.environ[\"LOCAL_RANK\"])}'\n"
              "else:\n    device = 'cuda'\n    print(f'using device: {device}')\n"
              "    data = datasets.MNIST('d', download=True)\n    state = torch.load('c.pt')\n"
              "if not ddp:\n    print('single process')\nprint('every rank')\n")
    found = [(f.rule, f.line) for f in check_source(source, "t.py")
             if f.rule in ("unguarded-print", "download-every-rank", "torch-load-no-map-location")]
    assert found == [("unguarded-print", 14)]


def test_a_file_per_rank_named_through_a_variable_is_saved_and_loaded_by_every_rank():
    """SwAV keeps each rank's queue in queue{rank}.pth: every rank saves and loads its own."""
    source = ("import os, torch, torch.distributed as dist\ndist.init_process_group('nccl')\n"
              "rank = dist.get_rank()\ntorch.cuda.set_device(rank)\n"
              "queue_path = os.path.join('out', 'queue' + str(rank) + '.pth')\n"
              "queue = torch.load(queue_path)['queue']\ntorch.save({'queue': queue.cuda()}, queue_path)\n")
    rules = {f.rule for f in check_source(source, "t.py")}
    assert not rules & {"torch-load-no-map-location", "unguarded-checkpoint"}


def test_an_early_exit_that_also_needs_another_condition_is_not_a_sure_hang():
    """open_clip's evaluate(): non-zero ranks leave only when not evaluating with FSDP; the broadcast
    sits under `if use_fsdp_eval:`, where every rank is still there."""
    base = ("import torch.distributed as dist\n"
            "def evaluate(args, is_rank0, use_fsdp_eval):\n"
            "    if not use_fsdp_eval and not is_rank0:\n        return {}\n")
    safe = base + "    if use_fsdp_eval:\n        dist.broadcast(signal, src=0)\n"
    unsure = base + "    dist.broadcast(signal, src=0)\n"
    plain = ("import torch.distributed as dist\ndef evaluate(is_rank0):\n    if not is_rank0:\n        return {}\n"
             "    dist.broadcast(signal, src=0)\n")
    assert "collective-in-rank-branch" not in {f.rule for f in check_source(safe, "t.py")}
    hit = next(f for f in check_source(unsure, "t.py") if f.rule == "collective-in-rank-branch")
    assert hit.severity == "advice" and "only when use_fsdp_eval also holds" in hit.caveat
    assert [f.severity for f in check_source(plain, "t.py") if f.rule == "collective-in-rank-branch"] == ["error"]


def test_a_package_folder_resolves_its_own_absolute_imports():
    pkg = FOLLOW / "src_layout" / "trainpkg"
    assert not {"local-rank-argument", "unguarded-print"} & {f.rule for f in check_file(pkg / "main.py")}
    report = check_folder(pkg)
    assert report.files == [str(pkg / "__init__.py"), str(pkg / "distributed.py"), str(pkg / "main.py")]
    assert not {"local-rank-argument", "unguarded-print"} & {f.rule for f in report.findings}
