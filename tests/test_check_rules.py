"""Each `mgtutor check` rule on a minimal script that has the mistake and one that does not, plus
the patterns real DDP scripts use that must stay silent."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mgtutor.diagnostics.check.script import check_file, check_source, findings_for_symptom, findings_with_tags
from mgtutor.diagnostics.check import rules as rules_module
from mgtutor.diagnostics.check.rules import RULES, SEVERITIES, SYMPTOM_TAGS, RuleDataError, function_named, rules_from
from mgtutor.lessons.loader import PATH as LESSON_IDS

SNIPPETS = Path(__file__).parent / "data" / "check"
RULES_JSON = Path(rules_module.__file__).with_name("rules.json")
RULE_IDS = [rule.id for rule in RULES]


def rules_in(text: str) -> list[str]:
    return [f.rule for f in check_source(textwrap.dedent(text), "t.py")]


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_rule_fires_on_its_positive_snippet(rule_id):
    findings = check_file(SNIPPETS / f"{rule_id}.bad.py")
    hits = [f for f in findings if f.rule == rule_id]
    assert hits, f"{rule_id} did not fire; got {[f.rule for f in findings]}"
    source = (SNIPPETS / f"{rule_id}.bad.py").read_text().splitlines()
    for hit in hits:
        assert hit.code == source[hit.line - 1].strip()


@pytest.mark.parametrize("rule_id", RULE_IDS)
def test_rule_is_silent_on_its_negative_snippet(rule_id):
    assert rule_id not in [f.rule for f in check_file(SNIPPETS / f"{rule_id}.good.py")]


@pytest.mark.parametrize("rule", RULES, ids=RULE_IDS)
def test_rule_data_is_complete(rule):
    assert rule.severity in SEVERITIES
    assert rule.lesson in LESSON_IDS
    assert rule.title and rule.why and rule.fix and rule.before and rule.after and rule.tags
    assert set(rule.tags) <= {"data", "device", "speed", "hang", "output", "precision", "launch"}


def test_rules_json_names_each_function_by_its_module_and_name():
    """Every function a rule names in rules.json is that function of the module FUNCTION_MODULES gives."""
    for row, rule in zip(json.loads(RULES_JSON.read_text("utf-8"))["rules"], RULES, strict=True):
        for key in ("find", "fix_for", "rewrite", "fix_unsure"):
            if key in row:
                module, name = row[key].split(".")
                assert getattr(rule, key) is getattr(rules_module.FUNCTION_MODULES[module], name)
    assert function_named("speed.fp16_without_scaler").__name__ == "fp16_without_scaler"


@pytest.mark.parametrize("name", [
    "speed.no_such_rule",        # no such function
    "nowhere.fp16_without_scaler",  # no such module in FUNCTION_MODULES
    "os.system",                 # a module rules.py does not list
    "match.Hits",                # not a function
    "match.ast",                 # a module the matcher imports
    "speed",                     # no function named at all
    "speed.fp16_without_scaler.x",
])
def test_a_name_rules_json_cannot_resolve_is_an_error(name):
    with pytest.raises(RuleDataError):
        function_named(name)


def one_rule_json(**changes) -> str:
    row = {"id": "x", "severity": "warning", "title": "t", "why": "w", "fix": "f", "before": "b", "after": "a",
           "lesson": "04-ddp-torchrun", "tags": ["speed"], "find": "match.no_ddp_wrap", **changes}
    return json.dumps({"rules": [{k: v for k, v in row.items() if v is not None}]})


def test_a_well_formed_row_becomes_a_rule():
    (rule,) = rules_from(one_rule_json(rewrite="fixes_amp.torch_amp", safety="unsafe"))
    assert rule.find is rules_module.match.no_ddp_wrap and rule.rewrite is rules_module.fixes_amp.torch_amp
    assert (rule.tags, rule.confidence, rule.safety, rule.fix_for) == (("speed",), "medium", "unsafe", None)


@pytest.mark.parametrize("changes, said", [
    ({"find": "match.no_such_matcher"}, "match.no_such_matcher"),
    ({"rewrite": "fixes.no_such_fix"}, "fixes.no_such_fix"),
    ({"matcher": "match.no_ddp_wrap"}, "unknown keys ['matcher']"),
    ({"why": None}, "missing keys ['why']"),
    ({"severity": "fatal"}, "severity 'fatal'"),
    ({"confidence": "certain"}, "confidence 'certain'"),
    ({"safety": "maybe"}, "safety 'maybe'"),
    ({"tags": ["gpu"]}, "tags"),
    ({"tags": "speed"}, "tags"),
    ({"title": ""}, "title is not a text"),
    ({"find": 3}, "find is not a text"),
])
def test_rules_json_that_rule_cannot_be_made_from_is_an_error(changes, said):
    with pytest.raises(RuleDataError, match="rule 'x'") as caught:
        rules_from(one_rule_json(**changes))
    assert said in str(caught.value)


def test_a_rule_id_twice_is_an_error():
    row = json.loads(one_rule_json())["rules"][0]
    with pytest.raises(RuleDataError, match="an id twice"):
        rules_from(json.dumps({"rules": [row, row]}))


def test_rule_ids_are_unique_and_every_snippet_belongs_to_a_rule():
    assert len(set(RULE_IDS)) == len(RULE_IDS)
    named = {p.name.split(".")[0] for p in SNIPPETS.glob("*.py") if not p.name.startswith("clean_")}
    assert named == set(RULE_IDS)


@pytest.mark.parametrize("script", sorted(SNIPPETS.glob("clean_*.py")), ids=lambda p: p.stem)
def test_well_written_ddp_scripts_have_no_error_or_warning(script):
    bad = [(f.rule, f.line) for f in check_file(script) if f.severity != "advice"]
    assert bad == []


def test_rank_test_against_minus_one_is_not_a_rank_branch():
    assert "collective-in-rank-branch" not in rules_in("""
        import os
        import torch.distributed as dist
        ddp = int(os.environ.get("RANK", -1)) != -1
        if ddp:
            dist.init_process_group("gloo")
            dist.barrier()
        if int(os.environ.get("LOCAL_RANK", -1)) != -1:
            dist.all_reduce(t)
    """)


def test_collective_after_an_early_return_on_other_ranks_hangs():
    found = rules_in("""
        import torch.distributed as dist
        def save(model, rank):
            if rank != 0:
                return
            torch.save(model.state_dict(), "m.pt")
            dist.barrier()
    """)
    assert "collective-in-rank-branch" in found


def test_collective_in_both_branches_is_fine():
    assert "collective-in-rank-branch" not in rules_in("""
        import torch.distributed as dist
        if dist.get_rank() == 0:
            obj = [load()]
            dist.broadcast_object_list(obj, src=0)
        else:
            obj = [None]
            dist.broadcast_object_list(obj, src=0)
    """)


def test_accelerate_wait_for_everyone_under_main_process_hangs():
    assert "collective-in-rank-branch" in rules_in("""
        from accelerate import Accelerator
        accelerator = Accelerator()
        if accelerator.is_main_process:
            accelerator.wait_for_everyone()
    """)


def test_checkpoint_per_rank_file_is_not_flagged():
    assert "unguarded-checkpoint" not in rules_in("""
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        torch.save(state, f"shard-{rank}.pt")
    """)


def test_checkpoint_in_a_function_spawned_on_every_rank_is_flagged():
    assert "unguarded-checkpoint" in rules_in("""
        import torch, torch.multiprocessing as mp
        def worker(rank, world):
            torch.save(model.state_dict(), "m.pt")
        mp.spawn(worker, args=(2,), nprocs=2)
    """)


def test_checkpoint_in_a_function_never_called_here_is_unknown():
    assert "unguarded-checkpoint" not in rules_in("""
        import torch, torch.distributed as dist
        dist.init_process_group("gloo")
        def save(model):
            torch.save(model.state_dict(), "m.pt")
    """)


def test_checkpoint_in_constructor_of_a_class_built_on_every_rank():
    assert "unguarded-tracker" in rules_in("""
        import torch.distributed as dist
        from torch.utils.tensorboard import SummaryWriter
        class Trainer:
            def __init__(self):
                self.setup()
            def setup(self):
                dist.init_process_group("gloo")
                self.writer = SummaryWriter("runs")
        Trainer()
    """)


def test_rank_flag_through_a_constructor_parameter_guards():
    assert "unguarded-checkpoint" not in rules_in("""
        import torch, torch.multiprocessing as mp
        class Trainer:
            def __init__(self, model, gpu_id):
                self.gpu_id = gpu_id
            def save(self):
                torch.save(self.model.state_dict(), "m.pt")
            def train(self):
                if self.gpu_id == 0:
                    self.save()
        def main(rank, world):
            Trainer(None, rank).train()
        mp.spawn(main, args=(2,), nprocs=2)
    """)


def test_cuda0_in_the_single_process_branch_is_not_flagged():
    assert "hardcoded-cuda0" not in rules_in("""
        import torch, torch.distributed as dist
        if distributed:
            dist.init_process_group("nccl")
            device = torch.device("cuda", local_rank)
        else:
            device = torch.device("cuda:0")
    """)


def test_cuda0_forms_are_all_caught():
    found = [f.line for f in check_source(textwrap.dedent("""
        import torch, torch.distributed as dist
        dist.init_process_group("nccl")
        a = x.cuda(0)
        torch.cuda.set_device(0)
        b = torch.load("c.pt", map_location="cuda:0")
        m = DistributedDataParallel(m, device_ids=[0])
        y = y.to(0)
    """), "t.py") if f.rule == "hardcoded-cuda0"]
    assert found == [4, 5, 6, 7, 8]


def test_sampler_created_but_not_passed_is_named():
    findings = check_source(textwrap.dedent("""
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler
        dist.init_process_group("gloo")
        sampler = DistributedSampler(ds)
        loader = DataLoader(ds, batch_size=8, shuffle=True)
    """), "t.py")
    hit = next(f for f in findings if f.rule == "ddp-no-sampler")
    assert "line 5" in hit.message and hit.line == 6


def test_an_eval_loader_beside_a_sharded_one_is_left_alone():
    assert "ddp-no-sampler" not in rules_in("""
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler
        dist.init_process_group("gloo")
        train = DataLoader(ds, sampler=DistributedSampler(ds))
        val = DataLoader(val_ds, batch_size=64)
    """)


def test_no_distributed_setup_means_no_ddp_findings():
    assert rules_in("""
        import torch
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=8, shuffle=True)
        model = torch.nn.Linear(2, 2).to("cuda:0")
        torch.save(model.state_dict(), "m.pt")
        print("done")
    """) == []


def test_fp16_with_default_cuda_autocast_and_no_scaler():
    assert "fp16-no-scaler" in rules_in("""
        import torch
        for x in loader:
            with torch.autocast("cuda"):
                loss = model(x)
            loss.backward()
    """)
    assert "fp16-no-scaler" not in rules_in("""
        import torch
        with torch.autocast("cuda"):
            out = model(x)
    """)  # inference: nothing to scale


def test_symptom_and_tag_filters():
    findings = check_file(SNIPPETS / "hardcoded-cuda0.bad.py") + check_file(SNIPPETS / "ddp-no-sampler.bad.py")
    assert {f.rule for f in findings_for_symptom(findings, "one-gpu-busy")} >= {"hardcoded-cuda0", "no-set-device"}
    assert {f.rule for f in findings_for_symptom(findings, "same-data")} == {"ddp-no-sampler"}
    assert "init-no-timeout" in {f.rule for f in findings_for_symptom(findings, "hang")}
    assert findings_with_tags(findings, "precision") == []
    assert set(SYMPTOM_TAGS) == {"one-gpu-busy", "same-data", "no-speedup", "hang"}
    with pytest.raises(KeyError):
        findings_for_symptom(findings, "slow-disk")


def test_first_process_barrier_split_across_functions_is_fine():
    assert "collective-in-rank-branch" not in rules_in("""
        import torch
        def load(args):
            if args.local_rank not in [-1, 0]:
                torch.distributed.barrier()
            return read_cache()
        def main(args):
            data = load(args)
            if args.local_rank == 0:
                torch.distributed.barrier()
    """)


def test_device_ids_given_positionally_bind_the_device():
    assert "no-set-device" not in rules_in("""
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group(backend="nccl")
        model = DDP(model.cuda(ids[0]), ids)
    """)


def test_in_memory_checkpoint_buffer_is_not_a_file():
    assert "unguarded-checkpoint" not in rules_in("""
        import io, torch, torch.distributed as dist
        dist.init_process_group("gloo")
        buffer = io.BytesIO()
        torch.save(state, buffer)
    """)


def test_init_timeout_fix_is_written_from_the_users_own_call() -> None:
    source = ("import torch.distributed as dist\n"
              "def main():\n"
              "    dist.init_process_group(backend='gloo', init_method='env://')\n")
    (finding,) = [f for f in check_source(source) if f.rule == "init-no-timeout"]
    assert finding.fix_before == "dist.init_process_group(backend='gloo', init_method='env://')"
    assert finding.fix_after == ("dist.init_process_group(backend='gloo', init_method='env://', "
                                 "timeout=datetime.timedelta(minutes=5))")
    assert "30 on gloo" in finding.why and "NCCL: up to 30" not in finding.why


def test_init_timeout_fix_for_a_call_without_arguments() -> None:
    source = "import torch.distributed as dist\ndist.init_process_group()\n"
    (finding,) = [f for f in check_source(source) if f.rule == "init-no-timeout"]
    assert finding.fix_after == "dist.init_process_group(timeout=datetime.timedelta(minutes=5))"


def test_a_callback_runs_where_the_call_that_gets_it_runs():
    """`train(model, on_epoch_end=report)` on every rank: report's print and save run on every rank too
    (convert's output is checked for them); a callback handed to a library stays unknown."""
    text = """
        import torch, torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP

        def report(epoch):
            print(f"epoch {epoch}")
            torch.save({"epoch": epoch}, "last.pt")

        def train(model, on_epoch_end):
            for epoch in range(2):
                on_epoch_end(epoch)

        dist.init_process_group("gloo")
        model = DDP(torch.nn.Linear(2, 2))
        train(model, on_epoch_end=report)
        """
    found = rules_in(text)
    assert "unguarded-print" in found and "unguarded-checkpoint" in found
    library = text.replace("train(model, on_epoch_end=report)", "trainer.fit(model, callbacks=[report])")
    assert "unguarded-print" not in rules_in(library)
