"""Where a run goes: ranks, backend and nodes — `mgtutor run`'s flags and the Monitor's launch form."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mgtutor.training.foundation.i18n import _
from mgtutor.training.runs.launch.launcher import BACKENDS
from mgtutor.tui.options.flags import Flag, OptionError, positive_int, rank_number


@dataclass
class LaunchOptions:
    nproc: int | None = None
    backend: str = "auto"
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None

    def validate(self) -> LaunchOptions:
        if self.nproc is not None and self.nproc < 1:
            raise OptionError(_("ranks must be at least 1 (got {count})").format(count=self.nproc))
        if self.backend not in BACKENDS:
            raise OptionError(_("backend must be one of {choices} (got {backend!r})").format(
                choices=", ".join(BACKENDS), backend=self.backend))
        if self.nnodes < 1:
            raise OptionError(_("nodes must be at least 1 (got {count})").format(count=self.nnodes))
        if self.nnodes > 1:
            if not 0 <= self.node_rank < self.nnodes:
                raise OptionError(_("node rank must be 0…{last} for {nodes} nodes (got {rank})").format(
                    last=self.nnodes - 1, nodes=self.nnodes, rank=self.node_rank))
            if not (self.rdzv_endpoint or "").strip():
                raise OptionError(_("several nodes need the rendezvous endpoint HOST:PORT of node 0, the same on "
                                    "every node"))
        return self

    @classmethod
    def from_text(cls, nproc: str = "", backend: str = "auto", nnodes: str = "1", node_rank: str = "0",
                  rdzv_endpoint: str = "") -> LaunchOptions:
        """From a form's fields (text as typed; blank ranks = one per GPU)."""
        nodes = _field(_("nodes"), nnodes.strip() or "1", positive_int)
        return cls(nproc=_field(_("ranks"), nproc, positive_int) if nproc.strip() else None, backend=backend,
                   nnodes=nodes,
                   node_rank=_field(_("node rank"), node_rank.strip() or "0", rank_number) if nodes > 1 else 0,
                   rdzv_endpoint=rdzv_endpoint.strip() or None).validate()

    def spec_fields(self) -> dict[str, Any]:
        """Keyword arguments for LaunchSpec."""
        one = self.nnodes == 1
        return {"nproc": self.nproc, "backend": self.backend, "nnodes": self.nnodes,
                "node_rank": 0 if one else self.node_rank, "rdzv_endpoint": None if one else self.rdzv_endpoint}

    def command_args(self) -> list[str]:
        """The same choice as `mgtutor run` flags (defaults left out)."""
        argv = [] if self.nproc is None else ["--nproc", str(self.nproc)]
        if self.backend != "auto":
            argv += ["--backend", self.backend]
        if self.nnodes > 1:
            argv += ["--nnodes", str(self.nnodes), "--node-rank", str(self.node_rank),
                     "--rdzv-endpoint", str(self.rdzv_endpoint)]
        return argv


def _field(name: str, text: str, convert: Any) -> Any:
    try:
        return convert(text.strip())
    except OptionError as exc:
        raise OptionError(f"{name} {exc}") from None


LAUNCH_FLAGS = (
    Flag(("--nproc",), "nproc", "ranks to start (default: one per GPU, or 2 CPU ranks without GPUs)",
         positive_int, "N"),
    Flag(("--backend",), "backend", "NCCL on GPUs, gloo on CPUs; auto picks NCCL when a GPU is present",
         None, "{auto,nccl,gloo}", BACKENDS),
    Flag(("--nnodes",), "nnodes", "nodes in the job (default 1)", positive_int, "N"),
    Flag(("--node-rank",), "node_rank", "this node's rank; node 0 is the host of --rdzv-endpoint", rank_number, "R"),
    Flag(("--rdzv-endpoint",), "rdzv_endpoint", "node 0's address and a free port, the same on every node",
         str, "HOST:PORT"),
)
