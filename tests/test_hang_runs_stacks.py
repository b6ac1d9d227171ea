"""`mgtutor runs stacks ID` on runs that have ended (a live run is in test_hang_cli.py), and bad input."""
from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest

from mgtutor.tui.commands.runs.stacks import stacks_main
from mgtutor.tui.errors import CliError

CAPTURE = Path(__file__).parent / "data" / "hang" / "world-size-auto"


def ended_run(name: str, with_stacks: bool) -> Path:
    run = Path(os.environ["XDG_STATE_HOME"]) / "mgtutor" / "runs" / name
    for sub in ("logs", "ranks"):
        (run / sub).mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"run_id": name, "world_size": 2, "backend": "gloo", "started": 1.0}))
    (run / "result.json").write_text(json.dumps({"run_id": name, "status": "stopped", "world_size": 2, "ranks": []}))
    if with_stacks:
        shutil.copytree(CAPTURE, run / "stacks" / "20261201-100010-1-stall")
    return run


def test_an_ended_run_shows_its_last_capture():
    ended_run("20261201-100000-hang-py-0001", with_stacks=True)
    out = io.StringIO()
    assert stacks_main("hang-py-0001", out=out) == 0
    text = out.getvalue()
    assert text.startswith("stacks of run 20261201-100000-hang-py-0001 (run stopped: its last capture)")
    assert "hang report (world_size_mismatch): 2 ranks started, they wait for 3" in text
    assert "  rank 1: " in text and "rank1.txt" in text
    out = io.StringIO()
    assert stacks_main("hang-py-0001", as_json=True, out=out) == 0
    data = json.loads(out.getvalue())
    assert data["live"] is False and data["status"] == "stopped" and data["where"]["0"]["line"] == 38


def test_bad_input_is_one_line():
    ended_run("20261201-110000-quiet-0002", with_stacks=False)
    with pytest.raises(CliError, match="give a run id"):
        stacks_main(None)
    with pytest.raises(CliError, match="no single run matches 'nope'"):
        stacks_main("nope")
    with pytest.raises(CliError, match="is stopped and has no saved stacks") as info:
        stacks_main("quiet-0002")
    assert info.value.exit_code == 1
