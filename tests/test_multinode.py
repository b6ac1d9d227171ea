"""Multi-node launch without a second host: input checks, torchrun's rendezvous arguments, what a
node's run record holds. The real two-host runs are in test_multinode_netns.py."""
from __future__ import annotations

import dataclasses

import subprocess
from pathlib import Path

import pytest

from conftest import mgtutor_argv, no_gpu_env
from mgtutor.training.runs.records.types import RankExit, RunMeta
from mgtutor.training.runs.launch.launcher import LaunchError, LaunchSpec, launch
from mgtutor.training.runs.net.multinode import (NodeError, diagnose_node, hosted_ranks, node_env, node_meta, node_state,
                                        plan_node, rendezvous_args)
from mgtutor.training.runs.records.record import RunRecord, build_result


def test_single_node_needs_no_plan() -> None:
    assert plan_node(1, 0, None, None) is None
    assert node_meta(None, 3)["global_ranks"] == [0, 1, 2]


@pytest.mark.parametrize("nnodes, rank, endpoint, message", [
    (2, 0, None, "needs --rdzv-endpoint"),
    (2, 2, "127.0.0.1:29400", "--node-rank must be from 0 to 1"),
    (0, 0, None, "--nnodes must be at least 1"),
    (2, 1, "127.0.0.1:99999", "bad port"),
    (2, 1, "no-such-node.invalid:29400", "cannot resolve"),
    (2, 0, "192.0.2.123:29400", "is not an address of this machine"),
])
def test_bad_node_input_says_what_to_do(nnodes: int, rank: int, endpoint: str | None, message: str) -> None:
    with pytest.raises(NodeError, match=message):
        plan_node(nnodes, rank, endpoint, None)


def test_node0_hosts_the_store_and_others_do_not() -> None:
    node0 = plan_node(2, 0, "127.0.0.1:29400", "job7", timeout_s=30)
    node1 = plan_node(2, 1, "127.0.0.1:29400", "job7", timeout_s=30)
    args0, args1 = rendezvous_args(node0), rendezvous_args(node1)
    conf = lambda args: args[args.index("--rdzv-conf") + 1].split(",")  # noqa: E731
    assert "is_host=1" in conf(args0) and "is_host=0" in conf(args1)
    assert {"join_timeout=30", "read_timeout=30"} <= set(conf(args0))
    for args in (args0, args1):
        assert args[args.index("--rdzv-endpoint") + 1] == "127.0.0.1:29400"
        assert args[args.index("--rdzv-id") + 1] == "job7" and args[args.index("--nnodes") + 1] == "2"
        assert args[args.index("--local-addr") + 1] == "127.0.0.1"
    assert plan_node(2, 1, "127.0.0.1:29400", None).rdzv_id == "mgtutor-127.0.0.1-29400"  # same on every node


def test_gloo_interface_is_the_route_unless_the_user_chose_one() -> None:
    node = plan_node(2, 1, "127.0.0.1:29400", "j")
    assert node_env({}, node)["GLOO_SOCKET_IFNAME"] == node.iface
    assert node_env({"GLOO_SOCKET_IFNAME": "eth7"}, node)["GLOO_SOCKET_IFNAME"] == "eth7"


def node_record(tmp_path: Path, node_rank: int, started: list[tuple[int, int]], exit_code: int | None = 0) -> RunRecord:
    """A node's record as the launcher and the rank wrappers write it; `started` = (global rank, local rank)."""
    record = RunRecord.create("node", tmp_path)
    node = plan_node(2, node_rank, "127.0.0.1:29400", "j")
    record.write_meta(RunMeta.from_json({"nproc_per_node": 2, "backend": "gloo", "started": 1.0, **node_meta(node, 2)}))
    for rank, local in started:
        record.write_rank(RankExit.from_json({"rank": rank, "local_rank": local, "node_rank": 0 if rank < 2 else 1, "pid": 100 + rank,
                           "started": 1.5, "ended": 2.0 if exit_code is not None else None, "exit_code": exit_code,
                           "signal": None}))
    return record


def test_a_node_record_lists_the_global_ranks_it_hosts(tmp_path: Path) -> None:
    # c10d numbered this node (--node-rank 0) second: its ranks are 2 and 3, not the expected 0 and 1
    record = node_record(tmp_path, 0, [(2, 0), (3, 1)])
    assert record.meta().global_ranks == [0, 1]
    result = build_result(record, torchrun_exit=0)
    assert [r.rank for r in result.ranks] == [2, 3]
    assert (result.status, result.world_size, result.nnodes, result.node_rank) == ("finished", 4, 2, 0)
    state = node_state(record.meta(), record.ranks(), "finished")
    assert state.global_ranks == [2, 3] and state.group_rank == 1 and state.ranks_started == 2


def test_a_node_whose_ranks_never_started_lists_the_expected_ones(tmp_path: Path) -> None:
    record = node_record(tmp_path, 1, [])
    result = build_result(record, torchrun_exit=1)
    assert [r.rank for r in result.ranks] == [2, 3]
    assert result.status == "failed" and {r.outcome for r in result.ranks} == {"never started"}
    assert hosted_ranks(record.meta(), []) == [2, 3]
    assert node_state(record.meta(), [], "failed").phase == "failed before its ranks started (rendezvous)"
    assert node_state(record.meta(), [], "running").phase.startswith("waiting for the other nodes")


def test_diagnosis_of_a_node_that_could_not_reach_the_store(tmp_path: Path) -> None:
    record = node_record(tmp_path, 1, [])
    port = 1  # nothing listens on port 1 here
    meta = dataclasses.replace(record.meta(), rdzv_endpoint=f"127.0.0.1:{port}")
    finding = diagnose_node(meta, [], "failed", "RendezvousConnectionError: The connection to the C10d store has failed")
    assert finding is not None and finding.kind == "rendezvous_unreachable" and f"127.0.0.1:{port}" in finding.evidence
    assert "refused" in finding.evidence
    assert diagnose_node(meta, [RankExit(rank=2, pid=5)], "failed", "") is None  # ranks ran: their logs say more
    host = dataclasses.replace(meta, node_rank=0, rdzv_is_host=True, rdzv_timeout_s=7)
    timeout = diagnose_node(host, [], "failed", "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError")
    assert timeout is not None and timeout.kind == "rendezvous_timeout" and "within 7 s" in timeout.evidence


def test_launch_refuses_a_second_node_without_an_endpoint(tmp_path: Path) -> None:
    script = tmp_path / "t.py"
    script.write_text("print('hi')\n")
    with pytest.raises(LaunchError, match="needs --rdzv-endpoint"):
        launch(LaunchSpec(target=[str(script)], nproc=1, backend="gloo", nnodes=2, node_rank=1))


@pytest.mark.integration
def test_cli_flags_reach_the_launcher_and_bad_ones_are_one_line(tmp_path: Path) -> None:
    script = tmp_path / "t.py"
    script.write_text("print('hi')\n")
    done = subprocess.run(mgtutor_argv("run", "--backend", "gloo", "--nnodes", "2", "--node-rank", "3",
                                       "--rdzv-endpoint", "127.0.0.1:29400", "--", str(script)),
                          capture_output=True, text=True, env=no_gpu_env(), timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip() == "mgtutor run: error: --node-rank must be from 0 to 1 for --nnodes 2 (got 3)"
