"""`mgtutor convert`: a one-GPU script becomes a DDP script; what it cannot convert is listed, never
guessed; it writes only where asked. The run of the result is in test_convert_runs.py."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from mgtutor.diagnostics.check.convert import convert_source
from mgtutor.diagnostics.check.script import CheckError, check_source
from mgtutor.tui.cli import main as cli_main

SHAPE = Path(__file__).parent / "data" / "check" / "convert" / "single_gpu_shape.py"


def test_the_tutorial_shaped_script_gets_every_ddp_part():
    report = convert_source(SHAPE.read_text(), "single_gpu_shape.py")
    after = report.after
    for line in ('import torch.distributed as dist\n',
                 'from torch.nn.parallel import DistributedDataParallel as DDP\n',
                 'from torch.utils.data.distributed import DistributedSampler\n',
                 'from datetime import timedelta\n',
                 '    if torch.cuda.is_available() and ranks_here <= torch.cuda.device_count():\n'
                 '        torch.cuda.set_device(local_rank)\n'
                 '        dist.init_process_group("nccl", timeout=timedelta(minutes=10))\n'
                 '        return torch.device("cuda", local_rank)\n'
                 '    dist.init_process_group("gloo", timeout=timedelta(minutes=10))\n    return torch.device("cpu")\n',
                 '        self.model = model.to(gpu_id)\n        self.model = DDP(self.model)\n',
                 '        self.train_data.sampler.set_epoch(epoch)\n        for source, targets in self.train_data:\n',
                 '        ckp = self.model.module.state_dict()\n',
                 '    return DataLoader(dataset, batch_size=batch_size, pin_memory=False, '
                 'sampler=DistributedSampler(dataset, shuffle=shuffle))\n',
                 '    device = ddp_setup()\n',
                 '    try:\n        parser = argparse.ArgumentParser(description="simple distributed training job")\n',
                 '        main(device, args.epochs, args.save_every, args.batch_size, not args.no_shuffle)\n'
                 '        dist.barrier()\n    finally:\n        dist.destroy_process_group()\n'):
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
            test = DataLoader(test_set, batch_size=8)
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
    assert "built inside the DataLoader call" in why[11]
    assert "a second DataLoader" in why[12]
    assert "evaluate() runs on every rank" in why[16]
    assert "DataLoader(make_set(), batch_size=8, shuffle=True)" in report.after  # left as it was


def test_data_that_is_not_a_dataloader_is_listed():
    report = convert_source((Path(__file__).parent.parent / "lessons" / "02-single-gpu-baseline" / "example.py")
                            .read_text(), "example.py")
    assert report.not_converted == [(1, "no DataLoader: every rank trains on the same data; give each rank its own "
                                        "shard by hand (a DistributedSampler, or slices by rank)")]
    assert "model = DDP(model)" in report.after


def test_a_dataloader_built_from_kwargs_is_left_to_the_user():
    source = textwrap.dedent('''\
        import torch
        from torch.utils.data import DataLoader


        def main(device):
            kwargs = {"batch_size": 8, "shuffle": True}
            loader = DataLoader(data, **kwargs)
            model = torch.nn.Linear(4, 1).to(device)


        if __name__ == "__main__":
            device = "cuda"
            main(device)
        ''')
    report = convert_source(source, "t.py")
    assert "loader = DataLoader(data, **kwargs)\n" in report.after  # a sampler beside shuffle=True would raise
    assert report.not_converted[0][0] == 7 and "**kwargs" in report.not_converted[0][1]


def test_a_script_without_a_main_block_is_refused_clearly():
    with pytest.raises(CheckError, match="no `if __name__ == \"__main__\":` block"):
        convert_source("import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n", "t.py")


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
    assert "never writes over a file" in capsys.readouterr().err
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
