"""`mgtutor convert`: a one-GPU script becomes a DDP script; what it cannot convert is listed, never
guessed; it writes only where asked. The run of the result is in test_convert_runs.py."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mgtutor.diagnostics.check.convert.to_ddp import convert_source
from mgtutor.diagnostics.check.script import CheckError, check_source
from mgtutor.tui.cli import main as cli_main

FIXTURES = Path(__file__).parent / "data" / "check" / "convert"
SHAPE = FIXTURES / "single_gpu_shape.py"
FLAT = FIXTURES / "flat_enumerate.py"                # flat, enumerate(loader), DataParallel
ACCEL = FIXTURES / "accel_kwargs.py"                 # device branch, **kwargs loaders, a callback
LOADERS = FIXTURES / "module_loaders.py"             # module-level loaders, data sets built in the call
STEPPED = FIXTURES / "stepped_rows.py"               # no DataLoader: a tensor stepped through by row index


def test_the_tutorial_shaped_script_gets_every_ddp_part():
    report = convert_source(SHAPE.read_text(), "single_gpu_shape.py")
    after = report.after
    for line in ('import torch.distributed as dist\n',
                 'from torch.nn.parallel import DistributedDataParallel as DDP\n',
                 'from torch.utils.data.distributed import DistributedSampler\n',
                 'from datetime import timedelta\n',
                 '    if not dist.is_initialized():\n'
                 '        wants_gpu = device is None or torch.device(device).type == "cuda"\n'
                 '        on_gpu = wants_gpu and torch.cuda.is_available() and ranks_here <= torch.cuda.device_count()\n'
                 '        if on_gpu:\n            torch.cuda.set_device(local_rank)\n'
                 '        dist.init_process_group("nccl" if on_gpu else "gloo", timeout=timedelta(minutes=10))\n',
                 '        self.model = model.to(gpu_id)\n        self.model = DDP(self.model)\n',
                 '        self.train_data.sampler.set_epoch(epoch)\n        for source, targets in self.train_data:\n',
                 '        ckp = self.model.module.state_dict()\n',
                 '    return DataLoader(dataset, batch_size=batch_size, pin_memory=False, '
                 'sampler=DistributedSampler(dataset, shuffle=shuffle))\n',
                 '    device = ddp_setup(args.device)\n',
                 '    try:\n        parser = argparse.ArgumentParser(description="simple distributed training job")\n',
                 '        main(device, args.epochs, args.save_every, args.batch_size, not args.no_shuffle)\n'
                 '        dist.barrier()\n    finally:\n        if dist.is_initialized():\n'
                 '            dist.destroy_process_group()\n'):
        assert line in after
    assert after.count('if int(os.environ.get("RANK", "0")) == 0:') == 4  # three prints and the save
    assert report.not_converted == []
    errors_or_warnings = [f.rule for f in check_source(after, "x.py") if f.severity != "advice"]
    assert errors_or_warnings == []


def test_untouched_lines_are_the_same_bytes():
    before = SHAPE.read_text()
    after = convert_source(before, "s.py").after
    changed = {"        print(", "        torch.save(", "    print(", "    device = ", "        ckp = ",
               "    return DataLoader("}
    main_block = before[before.index('if __name__ == "__main__":'):]
    for line in before[:len(before) - len(main_block)].splitlines(keepends=True):
        if not any(line.startswith(c) for c in changed):
            assert line in after
    for line in main_block.splitlines()[1:]:  # the __main__ block moved under try:, one level in
        if not line.startswith("    device = "):
            assert ("    " + line if line else line) in after.splitlines()


def test_converting_twice_says_it_is_already_distributed():
    once = convert_source(SHAPE.read_text(), "s.py").after
    with pytest.raises(CheckError, match="already sets up distributed training"):
        convert_source(once, "s.py")


def test_what_it_cannot_convert_is_listed_with_line_and_why():
    source = textwrap.dedent('''\
        import torch
        from torch.utils.data import DataLoader


        def evaluate(model, loader):
            return sum(model(x).sum() for x, _ in loader)


        def main(device):
            model = torch.nn.Linear(4, 1).to(device)
            train = DataLoader(make_set(), batch_size=8, shuffle=True)
            test = DataLoader(test_set, batch_size=8, sampler=EverySecond(test_set))
            for epoch in range(2):
                for x, y in train:
                    model(x.to(device)).sum().backward()
                evaluate(model, test)


        if __name__ == "__main__":
            device = "cuda"
            main(device)
        ''')
    report = convert_source(source, "t.py")
    why = {line: text for line, text in report.not_converted}
    assert "a second DataLoader" in why[12]
    assert "evaluate() runs on every rank" in why[16]
    # the data set built inside the call is named first, so the loader and its sampler share it
    assert ("    train_set = make_set()\n    train = DataLoader(train_set, batch_size=8, "
            "sampler=DistributedSampler(train_set, shuffle=True))\n") in report.after


def test_data_that_is_not_a_dataloader_is_listed():
    report = convert_source((Path(__file__).parent.parent / "lessons" / "02-single-gpu-baseline" / "example.py")
                            .read_text(), "example.py")
    assert report.not_converted == [(1, "no DataLoader: every rank trains on the same data; give each rank its own "
                                        "shard by hand (a DistributedSampler, or slices by rank)")]
    assert "model = DDP(model)" in report.after


def test_a_tensor_the_training_loop_steps_through_is_cut_into_equal_shares_once_the_group_exists():
    """No DataLoader, but a loop over `range(0, rows.size(0), batch)` that trains (PyTorch's word language
    model has this shape): each rank takes the same number of rows, so each takes as many steps."""
    report = convert_source(STEPPED.read_text(), "stepped_rows.py")
    after = report.after
    assert ("    rows = make_rows(101)\n"
            "    rows_per_rank = len(rows) // dist.get_world_size()  # the same for every rank: as many steps each\n"
            "    rows = rows[dist.get_rank() * rows_per_rank:(dist.get_rank() + 1) * rows_per_rank]\n") in after
    assert after.index("device = ddp_setup()") < after.index("rows_per_rank = ")
    assert report.not_converted == []
    assert "line 15: each rank takes an equal share of the rows of rows" in "\n".join(report.done)


def test_a_loop_that_only_evaluates_by_index_is_not_a_training_tensor():
    source = STEPPED.read_text().replace("            loss.backward()\n", "")
    report = convert_source(source, "stepped_rows.py")
    assert "rows_per_rank" not in report.after
    assert [why for _, why in report.not_converted if why.startswith("no DataLoader")]


def test_a_loader_of_kwargs_gets_its_sampler_with_the_shuffle_the_kwargs_ask_for():
    report = convert_source(ACCEL.read_text(), "accel_kwargs.py")
    assert ('    train_loader = DataLoader(train_set, **{**train_kwargs, "shuffle": False}, '
            'sampler=DistributedSampler(train_set, shuffle=train_kwargs.get("shuffle", False)))\n') in report.after
    assert "    test_loader = DataLoader(make_set(32, 1), **test_kwargs)\n" in report.after  # evaluation: listed
    assert [line for line, _ in report.not_converted] == [69, 75]


def test_the_setup_runs_after_the_device_branch_never_inside_it():
    after = convert_source(ACCEL.read_text(), "accel_kwargs.py").after
    assert ('    if use_accel:\n        device = torch.device("cuda")\n    else:\n        device = torch.device("cpu")\n'
            '    device = ddp_setup(device)\n') in after
    assert [f.rule for f in check_source(after, "x.py") if f.rule == "init-in-device-branch"] == []


def test_a_flat_script_is_converted_and_ends_by_leaving_the_group():
    report = convert_source(FLAT.read_text(), "flat_enumerate.py")
    after = report.after
    assert "\ndevice = ddp_setup()\n" in after  # "cuda:0 if available" is what ddp_setup picks, this rank's GPU
    assert after.index("def ddp_setup(") < after.index("device = ddp_setup(")
    assert after.endswith("if dist.is_initialized():\n    dist.barrier()\n    dist.destroy_process_group()\n")
    assert report.not_converted == []


def test_enumerate_over_the_loader_sets_the_epoch_on_the_loaders_sampler():
    after = convert_source(FLAT.read_text(), "flat_enumerate.py").after
    assert ("for epoch in range(epochs):\n    train_loader.sampler.set_epoch(epoch)\n"
            "    for i, (x, y) in enumerate(train_loader):\n") in after
    assert "enumerate(train_loader).sampler" not in after


def test_dataparallel_gives_way_to_ddp():
    after = convert_source(FLAT.read_text(), "flat_enumerate.py").after
    assert "nn.DataParallel" not in after and "device_count() > 1" not in after
    assert ".to(device)\nmodel = DDP(model)\ncriterion = nn.MSELoss()\n" in after
    assert "torch.save(model.module.state_dict(), \"model.ckpt\")" in after  # the one-GPU keys, as before
    assert 'model.module.load_state_dict(torch.load("model.ckpt", map_location="cpu"))' in after


def test_module_level_loaders_get_their_sampler_after_the_group_exists():
    report = convert_source(LOADERS.read_text(), "module_loaders.py")
    after = report.after
    assert after.index("device = ddp_setup(device)") < after.index("sampler=DistributedSampler(train_set")
    assert "            sample = model.module.decode(torch.randn(4, 2).to(device))\n" in after
    assert [f.rule for f in check_source(after, "x.py") if f.rule == "group-used-before-init"] == []


def test_a_loader_made_before_the_device_is_chosen_gets_the_setup_before_it():
    source = textwrap.dedent('''\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        data = TensorDataset(torch.rand(64, 4))
        loader = DataLoader(data, batch_size=8, shuffle=True)


        def main():
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
            model = torch.nn.Linear(4, 1).to(device)
            for epoch in range(2):
                for (x,) in loader:
                    model(x.to(device)).sum().backward()


        if __name__ == "__main__":
            main()
        ''')
    after = convert_source(source, "late_device.py").after
    assert "\nddp_setup()\nloader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data, shuffle=True))\n" \
        in after
    assert "    device = ddp_setup()\n" in after
    assert [f.rule for f in check_source(after, "x.py") if f.rule == "group-used-before-init"] == []


def test_prints_and_saves_in_a_callback_happen_once():
    after = convert_source(ACCEL.read_text(), "accel_kwargs.py").after
    guard = 'if int(os.environ.get("RANK", "0")) == 0:'
    assert (f'def report(epoch, loss):\n    {guard}\n        print(f"epoch {{epoch}} train loss {{loss:.4f}}")\n'
            f'    {guard}\n        torch.save({{"epoch": epoch}}, "last_epoch.pt")\n') in after


def test_no_barrier_inside_a_branch_the_ranks_may_take_differently():
    after = convert_source(ACCEL.read_text(), "accel_kwargs.py").after
    assert ("        if best is None or val_loss < best:\n"
            '            if int(os.environ.get("RANK", "0")) == 0:\n'
            '                torch.save(model.module.state_dict(), "best.pt")\n'
            "            best = val_loss\n"
            "        if dist.is_initialized():\n            dist.barrier()\n") in after


def test_the_group_is_destroyed_only_when_it_was_made():
    after = convert_source(ACCEL.read_text(), "accel_kwargs.py").after
    assert after.endswith("    try:\n        main()\n        dist.barrier()\n    finally:\n"
                          "        if dist.is_initialized():\n            dist.destroy_process_group()\n")


@pytest.mark.parametrize("fixture", [SHAPE, FLAT, ACCEL, LOADERS, STEPPED], ids=lambda p: p.stem)
def test_converted_scripts_pass_their_own_check(fixture):
    after = convert_source(fixture.read_text(), fixture.name).after
    assert [(f.rule, f.line) for f in check_source(after, fixture.name) if f.severity != "advice"] == []


def test_check_flags_what_an_earlier_convert_got_wrong():
    """The shapes convert wrote before issue 44 (the group set up inside `if use_accel:`, the set_epoch of
    `enumerate(loader)`, a sampler made before the group, a destroy that hides the real error, a
    DataLoader of **kwargs without a sampler): `check` names each of them."""
    broken = textwrap.dedent('''\
        import torch
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler

        data = make_data()
        sampler = DistributedSampler(data)


        def main():
            if torch.cuda.is_available():
                dist.init_process_group("nccl")
            train_kwargs = {"batch_size": 8, "shuffle": True}
            loader = DataLoader(data, **train_kwargs)
            for epoch in range(2):
                enumerate(loader).sampler.set_epoch(epoch)
                for i, (x, y) in enumerate(loader):
                    x.sum()


        if __name__ == "__main__":
            try:
                main()
            finally:
                dist.destroy_process_group()
        ''')
    found = {(f.rule, f.line) for f in check_source(broken, "old.py")}
    assert {("group-used-before-init", 6), ("init-in-device-branch", 11), ("ddp-no-sampler", 13),
            ("sampler-no-set-epoch", 6), ("destroy-hides-error", 24)} <= found


@pytest.mark.integration
def test_cli_shows_a_diff_writes_a_new_file_and_never_overwrites(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(SHAPE.read_text())
    assert cli_main(["convert", str(script)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"--- a/{str(script).lstrip('/')}") and "+        self.model = DDP(self.model)" in out
    assert script.read_text() == SHAPE.read_text()
    new = tmp_path / "train_ddp.py"
    assert cli_main(["convert", str(script), "-o", str(new)]) == 0
    assert "written to" in capsys.readouterr().out and "DDP(self.model)" in new.read_text()
    assert cli_main(["convert", str(script), "-o", str(new)]) == 2
    assert "is there already: give another -o FILE, or --force" in capsys.readouterr().err
    assert cli_main(["convert", str(script), "--fix", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["changed"] and data["written"] == str(script) and script.read_text() == new.read_text()
    assert cli_main(["convert", str(tmp_path / "missing.py")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_the_wrapped_models_state_dict_goes_through_module_on_save_and_load():
    source = textwrap.dedent('''\
        import torch


        def main(device):
            model = torch.nn.Linear(4, 1)
            model.load_state_dict(torch.load("start.pt"))  # before the wrap: the plain model
            model = model.to(device)
            torch.save(model.state_dict(), "end.pt")
            model.load_state_dict(torch.load("end.pt"))


        if __name__ == "__main__":
            device = 0
            main(device)
        ''')
    after = convert_source(source, "t.py").after
    assert '    model.load_state_dict(torch.load("start.pt", map_location="cpu"))  # before the wrap: the plain model\n' in after
    assert "    model = model.to(device)\n    model = DDP(model)\n" in after
    assert ('        torch.save(model.module.state_dict(), "end.pt")\n    if dist.is_initialized():\n'
            '        dist.barrier()\n    model.module.load_state_dict(torch.load("end.pt"))\n') in after


def test_a_model_built_on_either_branch_is_wrapped_after_the_branch():
    source = textwrap.dedent('''\
        import torch
        from torch.utils.data import DataLoader

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if big:
            model = torch.nn.Linear(8, 8).to(device)
        elif wide:
            model = torch.nn.Linear(8, 16).to(device)
        else:
            model = torch.nn.Linear(8, 4).to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        hidden = model.init_hidden(4)
        ''')
    after = convert_source(source, "branches.py").after
    assert "    model = torch.nn.Linear(8, 4).to(device)\nmodel = DDP(model)\noptimizer" in after
    assert after.count("DDP(model)") == 1 and "model.module.init_hidden(4)" in after


def test_a_folder_every_rank_makes_may_already_be_there():
    source = textwrap.dedent('''\
        import os
        import torch

        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        if not os.path.exists("samples"):
            os.makedirs("samples")
        model = torch.nn.Linear(4, 1).to(device)
        ''')
    after = convert_source(source, "folders.py").after
    assert '    os.makedirs("samples", exist_ok=True)\n' in after  # both ranks can pass the exists() test
