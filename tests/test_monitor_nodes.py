"""Multi-node runs in the Monitor: the node line from a run directory whose meta says 2 nodes (no second
node needed), and the form's node fields turned into the same flags as `mgtutor run`."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mgtutor.training.runs.records.record import RunRecord
from mgtutor.tui.widgets.launch_form import FormError, FormValues, build_launch
from mgtutor.tui.widgets.run_state import NodeLine
from tests.helpers import wait_for_app
from tests.monitor_helpers import make_app
from tests.test_monitor_state import FIXTURE

NODE_META = {"nnodes": 2, "node_rank": 1, "world_size": 4, "nproc_per_node": 2, "host": "node-b",
             "local_addr": "10.0.0.2", "iface": "eth1", "rdzv_endpoint": "10.0.0.1:29400", "rdzv_id": "job7",
             "rdzv_is_host": False, "global_ranks": [2, 3], "global_ranks_source": "expected"}


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")


def node_run(tmp_path: Path, **extra) -> RunRecord:
    """The fixture run as node 1 of 2: its two ranks are global ranks 2 and 3."""
    path = tmp_path / FIXTURE.name
    shutil.copytree(FIXTURE, path)
    meta = json.loads((path / "meta.json").read_text())
    (path / "meta.json").write_text(json.dumps({**meta, **NODE_META, **extra}))
    for rank_file in (path / "ranks").glob("*.json"):
        info = json.loads(rank_file.read_text())
        rank_file.write_text(json.dumps({**info, "rank": info["rank"] + 2, "world_size": 4, "node_rank": 1}))
    return RunRecord(path)


@pytest.mark.integration
async def test_node_line_shows_this_nodes_part_of_the_job(tmp_path):
    record = node_run(tmp_path)
    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("m")
        screen = pilot.app.screen
        line = screen.query_one(NodeLine)
        screen.attach(record, alive=lambda: True)
        await wait_for_app(pilot, lambda: line.has_class("-visible"), 30, what="the node line")
        text = line.plain
        assert text.startswith("node 1/2") and "node-b (10.0.0.2 via eth1)" in text
        assert "rdzv 10.0.0.1:29400 id job7" in text and "ranks 2,3" in text and "training" in text
        screen.workers.cancel_group(screen, "monitor-watch")
        single = RunRecord(tmp_path / "single")
        shutil.copytree(FIXTURE, single.path)
        screen.attach(single, alive=lambda: True)  # a run on one node has no node line
        await wait_for_app(pilot, lambda: screen.state is not None, 30, what="the single-node run")
        await pilot.pause(1.2)
        assert not line.has_class("-visible")
        screen.workers.cancel_group(screen, "monitor-watch")


def test_form_node_fields_become_run_flags():
    spec, command = build_launch(FormValues(kind="script", script="train.py", nproc="2", nnodes="2", node_rank="1",
                                            rdzv_endpoint="10.0.0.1:29400"))
    assert (spec.nnodes, spec.node_rank, spec.rdzv_endpoint) == (2, 1, "10.0.0.1:29400")
    assert "--nnodes 2 --node-rank 1 --rdzv-endpoint 10.0.0.1:29400 -- train.py" in command
    spec, command = build_launch(FormValues(kind="script", script="train.py", node_rank="5", rdzv_endpoint="x:1"))
    assert spec.nnodes == 1 and spec.rdzv_endpoint is None and "--nnodes" not in command  # one node: ignored
    with pytest.raises(FormError, match="node rank must be 0…1"):
        build_launch(FormValues(kind="script", script="train.py", nnodes="2", node_rank="2", rdzv_endpoint="h:1"))
    with pytest.raises(FormError, match="rendezvous endpoint"):
        build_launch(FormValues(kind="script", script="train.py", nnodes="2"))
    with pytest.raises(FormError, match="nodes must be"):
        build_launch(FormValues(kind="script", script="train.py", nnodes="two"))


def test_runs_list_says_which_node(tmp_path, monkeypatch):
    from mgtutor.tui.screens.runs import run_rows

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    from mgtutor.training.runs.records.record import runs_root

    runs_root().mkdir(parents=True, exist_ok=True)
    node_run(runs_root())
    rows = run_rows()
    assert len(rows) == 1 and rows[0][2] == "4 node 1/2"
