"""What a node of a multi-node run adds to a launch: rendezvous arguments, interface, record fields.

torchrun's c10d rendezvous meets at `--rdzv-endpoint HOST:PORT`: node 0 (the node whose address
that is) hosts the store, every other node connects to it. Two things break across hosts that never
break on one: torchrun and gloo find "this node's address" from the hostname, which on many
machines resolves to a loopback or wrong interface; and a node that cannot reach the store waits
for the full join timeout. So each node passes the address and interface that actually route to
the endpoint (`--local-addr`, GLOO_SOCKET_IFNAME), and the timeouts are the user's to shorten.

c10d orders nodes by address, not by `--node-rank`: the global ranks a node hosts are known once
its ranks start (ranks/rank<R>.json); `expected_ranks` is only the guess before that.
"""
from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.runs.records.types import RankExit, RunMeta, RunStatus
from mgtutor.training.runs.net.peer import PeerCheck, check_peer, is_local, parse_endpoint, resolve, route_to

DEFAULT_RDZV_PORT = 29400
MAX_NODES = 1 << 16  # a job of more nodes is a typo (or a 20-digit number), not a cluster


class NodeError(ValueError):
    """Bad multi-node input, with one line that says what to do instead."""


@dataclass(frozen=True)
class NodePlan:
    nnodes: int
    node_rank: int
    host: str
    port: int
    rdzv_id: str
    is_host: bool
    local_addr: str | None
    iface: str | None
    timeout_s: int | None

    @property
    def endpoint(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def plan_node(nnodes: int, node_rank: int, endpoint: str | None, rdzv_id: str | None,
              timeout_s: int | None = None) -> NodePlan | None:
    """None for a single-node run; else the node's plan, or NodeError with the fix."""
    if nnodes < 1:
        raise NodeError(_("--nnodes must be at least 1 (got {nnodes})").format(nnodes=nnodes))
    if nnodes > MAX_NODES:
        raise NodeError(_("--nnodes {nnodes} is more nodes than a job can have (at most {most})").format(
            nnodes=nnodes, most=MAX_NODES))
    if not 0 <= node_rank < nnodes:
        raise NodeError(_("--node-rank must be from 0 to {last} for --nnodes {nnodes} (got {node_rank})").format(
            last=nnodes - 1, nnodes=nnodes, node_rank=node_rank))
    if timeout_s is not None and timeout_s < 1:
        raise NodeError(_("--rdzv-timeout must be at least 1 second (got {timeout})").format(timeout=timeout_s))
    if nnodes == 1 and not endpoint:
        return None
    if not endpoint:
        raise NodeError(_("--nnodes > 1 needs --rdzv-endpoint HOST:PORT, the address of node 0 "
                          "that every node can reach (the same on every node)"))
    try:
        host, port = parse_endpoint(endpoint, DEFAULT_RDZV_PORT)
        addr = resolve(host)[0]
    except ValueError as exc:
        raise NodeError(f"--rdzv-endpoint: {exc}") from None
    except OSError as exc:
        raise NodeError(_("--rdzv-endpoint: cannot resolve {host} ({why}); use node 0's IP address").format(
            host=host, why=exc)) from None
    local = is_local(host)
    if node_rank == 0 and not local:
        raise NodeError(_("node 0 hosts the rendezvous store, but {host} is not an address of this machine: "
                          "run node 0 on {host}, or give this machine's address as --rdzv-endpoint").format(host=host))
    route = route_to(addr)  # a loopback endpoint is allowed: several "nodes" on one machine
    return NodePlan(nnodes=nnodes, node_rank=node_rank, host=host, port=port,
                    rdzv_id=rdzv_id or f"mgtutor-{host}-{port}", is_host=node_rank == 0,
                    local_addr=route.source, iface=route.iface, timeout_s=timeout_s)


def unresolved_name() -> tuple[str, str] | None:
    """(this machine's name, why it does not resolve), or None when it resolves. Left to itself, torchrun
    publishes this name as the address where the ranks meet, and a name that does not resolve makes
    them wait for ever (the launcher passes --local-addr, which torch before 2.5 ignores there)."""
    name = socket.gethostname()
    try:
        resolve(name)
    except OSError as exc:
        return name, exc.strerror or str(exc)
    return None


def unresolved_name_note(address: str) -> str | None:
    """A warning for the run's first lines when this machine's name does not resolve, else None."""
    unresolved = unresolved_name()
    if unresolved is None:
        return None
    name, why = unresolved
    return _("this machine's name {name} does not resolve ({why}): the ranks meet at {address} instead; torch "
             "older than 2.5 ignores that and waits for ever: add \"{address} {name}\" to /etc/hosts").format(
        name=name, why=why, address=address)


def rendezvous_args(node: NodePlan) -> list[str]:
    """torchrun's rendezvous arguments for this node (the single-node ones are in the launcher)."""
    conf = [f"is_host={'1' if node.is_host else '0'}"]
    if node.timeout_s is not None:
        # join_timeout: how long node 0 waits for the others; read_timeout: how long a node
        # tries to reach the store before it gives up with "connection … has failed".
        conf += [f"join_timeout={node.timeout_s}", f"read_timeout={node.timeout_s}"]
    args = ["--nnodes", str(node.nnodes),  # no --node-rank: c10d ignores it (our node 0 = is_host)
            "--rdzv-backend", "c10d", "--rdzv-endpoint", node.endpoint, "--rdzv-id", node.rdzv_id,
            "--rdzv-conf", ",".join(conf)]
    if node.local_addr:
        args += ["--local-addr", node.local_addr]  # what other nodes use to reach this one
    return args


def node_env(env: dict[str, str], node: NodePlan) -> dict[str, str]:
    """Point gloo at the interface that reaches the endpoint, unless the user chose one."""
    env = dict(env)
    if node.iface and not env.get("GLOO_SOCKET_IFNAME"):
        env["GLOO_SOCKET_IFNAME"] = node.iface
    return env


def expected_ranks(node_rank: int, nproc: int) -> list[int]:
    return list(range(node_rank * nproc, (node_rank + 1) * nproc))


def node_meta(node: NodePlan | None, nproc: int) -> dict[str, Any]:
    """meta.json fields that say which node of which job this record is."""
    if node is None:
        return {"nnodes": 1, "node_rank": 0, "world_size": nproc, "global_ranks": list(range(nproc))}
    return {
        "nnodes": node.nnodes, "node_rank": node.node_rank, "world_size": node.nnodes * nproc,
        "global_ranks": expected_ranks(node.node_rank, nproc), "global_ranks_source": "expected",
        "rdzv_endpoint": node.endpoint, "rdzv_id": node.rdzv_id, "rdzv_is_host": node.is_host,
        "rdzv_timeout_s": node.timeout_s, "local_addr": node.local_addr, "iface": node.iface,
    }


def hosted_ranks(meta: RunMeta, rank_infos: list[RankExit]) -> list[int]:
    """The global ranks this node hosts: from the rank records once any rank started, else expected."""
    nproc = meta.nproc_per_node or meta.world_size
    bases = {i.rank - i.local_rank for i in rank_infos}
    if len(bases) == 1:
        base = bases.pop()
        return list(range(base, base + nproc))
    if bases:  # ranks of two rendezvous rounds; list what was seen
        return sorted({i.rank for i in rank_infos})
    return list(meta.global_ranks or range(nproc))


@dataclass(frozen=True)
class NodeState:
    """One node of a job as the Monitor shows it: which node, which ranks, how far it got."""
    node_rank: int
    nnodes: int
    group_rank: int | None
    host: str
    local_addr: str | None
    iface: str | None
    rdzv_endpoint: str | None
    rdzv_id: str | None
    global_ranks: list[int]
    ranks_started: int
    status: str
    phase: str


# A node's phase beyond the run's own (said with `_()` where shown; `mgtutor runs --json` keeps them)
WAITING_FOR_NODES = N_("waiting for the other nodes (rendezvous)")
FAILED_BEFORE_RANKS = N_("failed before its ranks started (rendezvous)")


def node_state(meta: RunMeta, rank_infos: list[RankExit], status: str) -> NodeState:
    group_ranks = {i.node_rank for i in rank_infos}
    started = [i for i in rank_infos if i.pid]
    if status == RunStatus.RUNNING:
        phase = "training" if started else WAITING_FOR_NODES
    else:
        phase = status if started or status != "failed" else FAILED_BEFORE_RANKS
    return NodeState(node_rank=meta.node_rank, nnodes=meta.nnodes,
                     group_rank=group_ranks.pop() if len(group_ranks) == 1 else None,
                     host=meta.host, local_addr=meta.local_addr, iface=meta.iface,
                     rdzv_endpoint=meta.rdzv_endpoint, rdzv_id=meta.rdzv_id,
                     global_ranks=hosted_ranks(meta, rank_infos), ranks_started=len(started),
                     status=str(status), phase=str(phase))


_UNREACHABLE_MARKS = ("RendezvousConnectionError", "The client socket has timed out", "failed to connect")
_TIMEOUT_MARKS = ("RendezvousTimeoutError", "did not complete on time")


@dataclass(frozen=True)
class NodeDiagnosis:
    """Why this node never trained: a finding of the rendezvous, with the peer checks that ran."""
    kind: str  # rendezvous_unreachable | rendezvous_timeout
    endpoint: str
    evidence: str
    fix: str
    checks: tuple[PeerCheck, ...] = ()
    lesson: str = "multi-node"


def diagnose_node(meta: RunMeta, rank_infos: list[RankExit], status: str,
                  torchrun_log: str, probe_timeout: float = 5.0) -> NodeDiagnosis | None:
    """Why this node of a multi-node run never trained, naming the endpoint and the check that fails.

    None when the run is single-node, did not fail, or its ranks started (then the ranks' own logs
    say more than the rendezvous does).
    """
    endpoint = meta.rdzv_endpoint
    if meta.nnodes < 2 or not endpoint or status not in (RunStatus.FAILED, RunStatus.LOST):
        return None
    if any(i.pid for i in rank_infos):
        return None
    waited = meta.rdzv_timeout_s or 600
    if meta.rdzv_is_host:  # the store was ours and is gone with torchrun: probing it says nothing
        checks: tuple[PeerCheck, ...] = ()
        failed, unreachable = None, False
    else:
        report = check_peer(endpoint, timeout=probe_timeout)
        checks = tuple(report.checks)
        failed = report.first_failure()
        unreachable = any(m in torchrun_log for m in _UNREACHABLE_MARKS)
    if failed is not None or unreachable:
        return NodeDiagnosis(
            "rendezvous_unreachable", endpoint,
            evidence=(f"node {meta.node_rank} could not reach the rendezvous store at {endpoint}: "
                      + (failed.detail if failed else "torchrun: the connection to the store has failed")),
            fix=(failed.fix if failed and failed.fix else
                 f"check that node 0 runs on {endpoint} and the port is open: mgtutor doctor --peer {endpoint}"),
            checks=checks)
    others = meta.nnodes - 1
    timed_out = any(m in torchrun_log for m in _TIMEOUT_MARKS)
    return NodeDiagnosis(
        "rendezvous_timeout", endpoint,
        evidence=(f"node {meta.node_rank} {'hosted' if meta.rdzv_is_host else 'reached'} the "
                  f"rendezvous store at {endpoint}, but the other {others} node(s) did not "
                  f"join rendezvous '{meta.rdzv_id}' within {waited} s"
                  + ("" if timed_out else " (no timeout message in torchrun's log)")),
        fix=(f"start every node with the same --rdzv-endpoint {endpoint} and --rdzv-id {meta.rdzv_id}; "
             f"on each of them run `mgtutor doctor --peer {endpoint}` to find the check that fails"),
        checks=checks)
