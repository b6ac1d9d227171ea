"""Two hosts on one machine: network namespaces joined by a veth pair, one `mgtutor run` in each.

What crosses hosts for real here: torchrun's c10d rendezvous store (node 0 hosts it, node 1
connects over the veth), the workers' store and gloo's TCP pairs, each node's own run record.
Needs root (ip netns) and iproute2; the blocked-port case also needs nft. Everything made here —
namespaces, veth, processes inside them — is removed in the fixture's teardown.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from mgtutor.diagnostics.failures.classify import diagnose_run
from mgtutor.training.runs.events.writer import ResultEvent, read_events
from mgtutor.training.runs.records.record import RunRecord, list_runs

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.xdist_group("netns")]  # one worker: subnets by pid

PORT = 29411
TIMEOUT_S = 6  # --rdzv-timeout in the failure cases: how long a node waits for the other / the store
JOIN_S = 90  # --rdzv-timeout when both nodes start: generous, torch imports are slow on 2 busy cores
HANG_GUARD_S = 150  # far above TIMEOUT_S plus start-up on 2 busy cores: reaching it means a hang
TRAIN = ["-m", "mgtutor.training.worker.train", "--model", "tinycnn", "--steps", "4", "--batch-size", "8",
         "--dataset-size", "256", "--log-every", "1", "--seed", "3"]


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def _netns_unsupported() -> str | None:
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    probe = f"mgtprobe{os.getpid()}"
    made = _ip("netns", "add", probe, check=False)
    if made.returncode != 0:
        return f"ip netns add does not work here: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


@dataclass
class Host:
    ns: str
    iface: str
    addr: str
    state: Path  # this host's XDG_STATE_HOME: its own run records, as on a real second machine

    def mgtutor_run(self, *args: str, timeout_s: int = TIMEOUT_S) -> subprocess.Popen[str]:
        env = dict(os.environ, XDG_STATE_HOME=str(self.state), MGTUTOR_NO_NVML="1")
        env.pop("GLOO_SOCKET_IFNAME", None)
        return subprocess.Popen(["ip", "netns", "exec", self.ns, sys.executable, "-m", "mgtutor.tui", "run",
                                 "--backend", "gloo", "--nproc", "2", "--rdzv-timeout", str(timeout_s), *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def record(self) -> RunRecord:
        runs = list(list_runs(self.state / "mgtutor" / "runs"))
        assert len(runs) == 1, runs
        return runs[0]


@pytest.fixture
def two_hosts(tmp_path: Path):
    reason = _netns_unsupported()
    if reason:
        pytest.skip(reason)
    tag = f"{os.getpid() % 100000}"
    subnet = f"10.213.{os.getpid() % 200 + 20}"
    hosts = [Host(f"mgt{tag}n{i}", f"mgv{tag}n{i}", f"{subnet}.{i + 1}", tmp_path / f"host{i}") for i in range(2)]
    try:
        for host in hosts:
            host.state.mkdir()
            _ip("netns", "add", host.ns)
        _ip("link", "add", hosts[0].iface, "netns", hosts[0].ns, "type", "veth",
            "peer", "name", hosts[1].iface, "netns", hosts[1].ns)
        for host in hosts:
            _ip("-n", host.ns, "addr", "add", f"{host.addr}/24", "dev", host.iface)
            _ip("-n", host.ns, "link", "set", host.iface, "up")
            _ip("-n", host.ns, "link", "set", "lo", "up")
        yield hosts
    finally:
        for host in hosts:
            pids = _ip("netns", "pids", host.ns, check=False).stdout.split()
            for pid in pids:  # only what this test started lives in its namespaces
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            _ip("netns", "del", host.ns, check=False)  # takes its end of the veth with it


def finish(proc: subprocess.Popen[str], configured_s: int = TIMEOUT_S) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"the node hung past {HANG_GUARD_S} s although --rdzv-timeout is {configured_s} s:\n{err[-3000:]}")
    return proc.returncode, out, err


def node_args(rank: int, endpoint: str) -> list[str]:
    return ["--nnodes", "2", "--node-rank", str(rank), "--rdzv-endpoint", endpoint, "--rdzv-id", "netns-test"]


def test_two_nodes_train_to_identical_parameters(two_hosts: list[Host]) -> None:
    endpoint = f"{two_hosts[0].addr}:{PORT}"
    procs = [host.mgtutor_run(*node_args(i, endpoint), "--", *TRAIN, timeout_s=JOIN_S)
             for i, host in enumerate(two_hosts)]
    outcomes = [finish(p, JOIN_S) for p in procs]
    for code, _out, err in outcomes:
        assert code == 0, err[-4000:]
    hosted: list[int] = []
    digests: dict[int, str] = {}
    for i, host in enumerate(two_hosts):
        record = host.record()
        meta, result = record.meta().to_json(), record.result().to_json()
        assert result["status"] == "finished"
        assert (meta["nnodes"], meta["node_rank"], meta["world_size"]) == (2, i, 4)
        assert meta["local_addr"] == host.addr and meta["env"]["GLOO_SOCKET_IFNAME"] == host.iface
        ranks = [r["rank"] for r in result["ranks"]]
        assert len(ranks) == 2 and all(r["outcome"] == "ok" for r in result["ranks"])
        hosted += ranks
        for event in read_events(record.events_path):
            if isinstance(event, ResultEvent):
                digests[event.rank] = event.params_sha256
    assert sorted(hosted) == [0, 1, 2, 3]  # each node lists only the global ranks it hosts
    assert sorted(digests) == [0, 1, 2, 3]
    assert len(set(digests.values())) == 1, digests


def _block_port(host: Host, port: int) -> None:
    """Drop TCP to `port` arriving over the veth (node 0 still reaches its own store over lo)."""
    table = ["ip", "netns", "exec", host.ns, "nft"]
    for cmd in (["add", "table", "inet", "mgtutor_test"],
                ["add", "chain", "inet", "mgtutor_test", "input",
                 "{ type filter hook input priority 0; policy accept; }"],
                ["add", "rule", "inet", "mgtutor_test", "input", "iifname", host.iface, "tcp", "dport", str(port), "drop"]):
        subprocess.run([*table, *cmd], check=True, capture_output=True, timeout=30)


def test_blocked_store_port_is_diagnosed_not_a_hang(two_hosts: list[Host]) -> None:
    if shutil.which("nft") is None:
        pytest.skip("nft is not installed (the wrong-address test covers an unreachable endpoint)")
    node0, node1 = two_hosts
    endpoint = f"{node0.addr}:{PORT}"
    _block_port(node0, PORT)
    procs = [host.mgtutor_run(*node_args(i, endpoint), "--", *TRAIN) for i, host in enumerate(two_hosts)]
    (code0, _o0, err0), (code1, _o1, err1) = [finish(p) for p in procs]
    assert code1 != 0 and code0 != 0
    assert f"diagnosis (rendezvous_unreachable): node 1 could not reach the rendezvous store at {endpoint}" in err1
    assert "packets dropped" in err1 and f"port {PORT}" in err1
    assert "diagnosis (rendezvous_timeout)" in err0 and f"did not join rendezvous 'netns-test' within {TIMEOUT_S} s" in err0
    for host in two_hosts:
        result = host.record().result().to_json()
        assert result["status"] == "failed"
        assert all(r["outcome"] == "never started" for r in result["ranks"])
    # the failure classifier reads the same records to the same conclusion
    unreachable = diagnose_run(node1.record())[0]
    assert unreachable.kind == "rendezvous_unreachable" and f"{node0.addr}:{PORT}" in unreachable.summary
    assert diagnose_run(node0.record())[0].kind == "rendezvous_timeout"


def test_wrong_address_is_named(two_hosts: list[Host]) -> None:
    node1 = two_hosts[1]
    wrong = f"{node1.addr.rsplit('.', 1)[0]}.99:{PORT}"  # on the shared network, but nobody has it
    code, _out, err = finish(node1.mgtutor_run(*node_args(1, wrong), "--", *TRAIN))
    assert code != 0
    assert f"diagnosis (rendezvous_unreachable): node 1 could not reach the rendezvous store at {wrong}" in err
    assert "No route to host" in err or "cannot be reached" in err
    assert diagnose_run(node1.record())[0].kind == "rendezvous_unreachable"


def test_peer_probe_across_hosts_names_interface_mtu_and_gloo(two_hosts: list[Host]) -> None:
    """`doctor --serve` on one host, `doctor --peer` from the other: the veth is the route, an MTU
    mismatch is seen from both ends, and an unset GLOO_SOCKET_IFNAME is flagged (the hostname here
    resolves to an address outside the namespace)."""
    node0, node1 = two_hosts
    _ip("-n", node0.ns, "link", "set", node0.iface, "mtu", "1400")
    env = dict(os.environ, MGTUTOR_NO_NVML="1")
    env.pop("GLOO_SOCKET_IFNAME", None)
    env.pop("NCCL_SOCKET_IFNAME", None)
    ns = lambda host, *args: ["ip", "netns", "exec", host.ns, sys.executable, "-m", "mgtutor.tui", *args]  # noqa: E731
    server = subprocess.Popen(ns(node0, "doctor", "--serve", "--port", str(PORT), "--count", "1", "--json"),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert json.loads(server.stdout.readline())["serving"] == PORT
        probe = subprocess.run(ns(node1, "doctor", "--peer", f"{node0.addr}:{PORT}", "--json"),
                               capture_output=True, text=True, env=env, timeout=60)
        report = json.loads(probe.stdout)
        checks = {c["name"]: c for c in report["checks"]}
        assert report["route"]["iface"] == node1.iface and report["route"]["source"] == node1.addr
        assert checks["tcp"]["status"] == "ok"
        assert report["served"]["seen_from"] == node1.addr and report["served"]["iface"] == node0.iface
        assert checks["mtu"]["status"] == "warn" and "1400" in checks["mtu"]["detail"]
        assert checks["clock"]["status"] == "ok"  # one kernel, one clock
        assert checks["GLOO_SOCKET_IFNAME"]["status"] == "warn"
        assert checks["GLOO_SOCKET_IFNAME"]["fix"].startswith(f"export GLOO_SOCKET_IFNAME={node1.iface}")
        assert probe.returncode == 0  # warnings only
        assert server.wait(30) == 0
    finally:
        if server.poll() is None:
            server.kill()
        server.communicate()
