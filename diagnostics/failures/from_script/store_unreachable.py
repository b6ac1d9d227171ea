"""Ranks that cannot reach the rendezvous store, told from the script that pointed them there.

torch's TCP client retries a store that refuses or drops it for the whole timeout (30 min on gloo), printing
`TCP client failed to connect/validate to host H:P - retrying` or nothing at all. Where the script sets
MASTER_ADDR/MASTER_PORT itself (or writes `init_method="tcp://…"`), that line is the address the ranks
wait for; where it also starts its own processes with mp.spawn while mgtutor run started it under torchrun,
every rank's children inherit torchrun's TORCHELASTIC_USE_AGENT_STORE=True and all join as clients, so no
process ever hosts a store there. The live warning (store_watch.py) and `mgtutor diagnose` say the same.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mgtutor.diagnostics.check.run_facts import Assignment, env_settings, spawn_calls, tcp_init_methods
from mgtutor.diagnostics.failures.catalogue import load_catalogue
from mgtutor.diagnostics.failures.from_script.run_script import place, ran_model, ran_script
from mgtutor.training.foundation.i18n import _, ngettext, sentences
from mgtutor.training.foundation.safe_io import read_text_regular, write_private_atomic
from mgtutor.training.runs.forensics.stacks import list_captures
from mgtutor.training.runs.records.record import RunStatus

Finding = Any  # classify.Finding (classify calls this module)
KIND = "rendezvous_unreachable"
ADDRESS_VARS = ("MASTER_ADDR", "MASTER_PORT")
STORE_FILE = "store.json"  # beside a hang capture's report.json


@dataclass(frozen=True)
class StoreFacts:
    """What the script says about where its ranks meet."""
    script: str = ""
    settings: list[Assignment] = field(default_factory=list)  # MASTER_ADDR/MASTER_PORT, tcp:// init_method
    spawn_lines: list[int] = field(default_factory=list)

    def points_at(self, host: str, port: str) -> bool:
        """The script writes this host or port itself (a computed value counts: it may be this one)."""
        values = [str(a.value) for a in self.settings]
        return any(a.value is None for a in self.settings) or port in values or host in values or any(
            f"{host}:{port}" in v or f":{port}" in v for v in values)


def facts_of(record: Any) -> StoreFacts:
    ran = ran_model(record)
    if ran is None:
        return StoreFacts()
    path, model = ran
    settings = env_settings(model, ADDRESS_VARS) + tcp_init_methods(model)
    return StoreFacts(str(path), sorted(settings, key=lambda a: a.line), [c.lineno for c in spawn_calls(model)])


def unreachable_text(ranks: list[int], host: str, port: str, timeout_ms: str | None) -> str:
    """Who cannot reach which store, and for how long torch will go on trying."""
    who = ngettext("Rank {ranks} cannot reach the rendezvous store at {host}:{port}",
                   "Ranks {ranks} cannot reach the rendezvous store at {host}:{port}", len(ranks)).format(
        ranks=", ".join(map(str, ranks)), host=host, port=port) if ranks else \
        _("A rank cannot reach the rendezvous store at {host}:{port}").format(host=host, port=port)
    if timeout_ms and timeout_ms.isdigit():
        return who + _(": the connection is refused or dropped, and torch retries until its timeout ({seconds} s).").format(
            seconds=int(timeout_ms) // 1000)
    return who + _(": the connection is refused or dropped.")


def cause_text(facts: StoreFacts, host: str, port: str) -> str | None:
    """The script's own lines behind the address, and (mp.spawn under torchrun) why nobody hosts it."""
    if not facts.settings or not facts.points_at(host, port):
        return None
    lines = ", ".join(f"{place(facts.script, a.line)} (`{a.code}`)" for a in facts.settings[:3])
    if facts.spawn_lines:
        return _("Your script sets the address itself ({lines}) and starts its own processes with mp.spawn ({spawn}), "
                 "and mgtutor run started it under torchrun: each rank spawned its own children, which inherit "
                 "torchrun's TORCHELASTIC_USE_AGENT_STORE=True and all join {host}:{port} as clients, so no process "
                 "hosts the store there.").format(lines=lines, spawn=place(facts.script, facts.spawn_lines[0]),
                                                  host=host, port=port)
    return _("Your script sets the address itself ({lines}), in place of the one torchrun gave every rank.").format(
        lines=lines)


def live_text(facts: StoreFacts, ranks: list[int], address: Address) -> str:
    """The live warning: one short paragraph (the Monitor's banner shows a few lines); diagnose says more."""
    head = unreachable_text(ranks, address.host, address.port, address.timeout_ms)
    if not facts.settings or not facts.points_at(address.host, address.port):
        return head
    lines = ", ".join(place(facts.script, a.line) for a in facts.settings[:3])
    if facts.spawn_lines:
        return sentences(head, _("Your script sets that address ({lines}) and starts its own processes with mp.spawn "
                                 "({spawn}) under torchrun, so every rank's children join it as clients and none "
                                 "hosts the store: run it with `python {script}`, or drop mp.spawn and let torchrun "
                                 "start the ranks.").format(lines=lines, spawn=place(facts.script, facts.spawn_lines[0]),
                                                            script=Path(facts.script).name))
    return sentences(head, _("Your script sets that address ({lines}) in place of torchrun's: drop those lines.").format(
        lines=lines))


def fix_text(facts: StoreFacts) -> str | None:
    if not facts.settings:
        return None
    name = Path(facts.script).name
    if facts.spawn_lines:
        return _("Run it the way it starts itself, with plain python (`python {script}`): mp.spawn starts the ranks and "
                 "its rank 0 hosts the store. Or make it a torchrun script: drop mp.spawn and the lines that set the "
                 "address, and read RANK, LOCAL_RANK and WORLD_SIZE from the environment (`mgtutor lessons show "
                 "04-ddp-torchrun`).").format(script=name)
    return _("Drop line {lines} of {script}: torchrun sets MASTER_ADDR and MASTER_PORT in every rank (on several nodes, "
             "give node 0's address to `mgtutor run --rdzv-endpoint HOST:PORT`).").format(
        lines=", ".join(str(a.line) for a in facts.settings), script=name)


def keep_store(report: Any, address: Address) -> None:
    """Beside a hang capture: the store its ranks could not reach (the live warning found nothing there), so
    that `mgtutor diagnose` names it too: the logs of a store that refuses say nothing."""
    if not report.capture:
        return
    kept = {"host": address.host, "port": address.port,
            "ranks": {str(r): w.describe() for r, w in sorted(report.where.items())}}
    try:
        write_private_atomic(Path(report.capture) / STORE_FILE, json.dumps(kept, indent=2) + "\n")
    except OSError:
        return


def kept_store(record: Any) -> tuple[Address, dict[int, str], str] | None:
    """The store the newest hang capture kept (keep_store): its address, where each rank waited, the capture."""
    try:
        captures = list_captures(record)
    except OSError:
        return None
    for capture in reversed(captures):
        try:
            kept = json.loads(read_text_regular(capture / STORE_FILE))
            ranks = {int(r): str(text) for r, text in kept["ranks"].items()}
            return Address(str(kept["host"]), str(kept["port"])), ranks, capture.name
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return None


def explain(findings: list[Finding], record: Any, build: Callable[[dict[str, Any], list[dict[str, Any]]], Finding]
            ) -> list[Finding]:
    """A rendezvous_unreachable finding of a run gets the script's own lines behind the address; a run whose
    hang capture kept an unreachable store (keep_store) gets the finding (`build(fields, evidence)`) first."""
    finding = next((f for f in findings if f.kind == KIND), None)
    address = _address(finding) if finding is not None else None
    kept = kept_store(record) if finding is None else None
    if kept is not None:
        address, ranks, capture = kept
        evidence = [{"file": f"stacks/{capture}/rank{r}.txt", "line": 0, "text": f"rank {r}: {text}"}
                    for r, text in sorted(ranks.items())]
        who = (_("Rank {ranks}") if len(ranks) == 1 else _("Ranks {ranks}")).format(ranks=", ".join(map(str, ranks)))
        finding = build({"who": who, "host": address.host, "port": address.port}, evidence)
        finding.ranks = sorted(ranks)
        findings = [finding, *findings]
    if finding is not None and _only_retries(finding) and _finished(record):
        return [f for f in findings if f is not finding]  # a store that answered after a retry or two
    if finding is None or address is None or ran_script(record) is None:
        return findings
    facts = facts_of(record)
    cause = cause_text(facts, address.host, address.port)
    if cause is not None:
        finding.summary = sentences(finding.summary, cause)
        finding.fix = fix_text(facts) or finding.fix
    return findings


def _only_retries(finding: Finding) -> bool:
    """Every line that proved it is a retry (none says the client gave up)."""
    texts = [str(e.get("text", "")) for e in finding.evidence if address_in(str(e.get("text", "")))]
    return bool(texts) and all("- retrying (" in text for text in texts)


def _finished(record: Any) -> bool:
    try:
        return record.status() == RunStatus.FINISHED
    except (AttributeError, OSError):
        return False


def _address(finding: Finding) -> Address | None:
    """The store the finding's evidence names."""
    for evidence in finding.evidence:
        found = address_in(str(evidence.get("text", "")))
        if found is not None:
            return found
    return None


@dataclass(frozen=True)
class Address:
    host: str
    port: str
    timeout_ms: str | None = None


def address_in(line: str) -> Address | None:
    """The store a line says a client could not reach (the catalogue's rendezvous_unreachable patterns)."""
    if "connect" not in line:
        return None
    for pattern in load_catalogue()[KIND].patterns:
        found = pattern.regex.search(line)
        if found is not None and not pattern.evidence_only and "host" in found.groupdict():
            return Address(found["host"], found["port"], found.groupdict().get("timeout_ms"))
    return None
