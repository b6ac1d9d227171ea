"""The options of a rendezvous probe: `mgtutor doctor --rendezvous` flags and the Diagnostics input line."""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from mgtutor.diagnostics.doctor.rendezvous_probe import ProbeOptions
from mgtutor.training.runs.launch.launcher import BACKENDS
from mgtutor.training.foundation.i18n import N_, _
from mgtutor.tui.options.flags import Flag, OptionError, parse_words, positive_int, rank_number, seconds


@dataclass
class ProbeForm:
    nproc: int | None = None
    timeout: float = 30.0
    backend: str = "auto"
    skip_ranks: list[int] = field(default_factory=list)

    def validate(self, world: int | None = None) -> ProbeForm:
        """`world` (the planned rank count, when known) bounds --skip-rank."""
        if world is not None:
            bad = [r for r in self.skip_ranks if not 0 <= r < world]
            if bad:
                raise OptionError(_("--skip-rank {rank} is not a rank of this probe (ranks 0..{last})").format(
                    rank=bad[0], last=world - 1))
        return self

    def options(self) -> ProbeOptions:
        return ProbeOptions(nproc=self.nproc, timeout=self.timeout, backend=self.backend,
                            skip_ranks=list(self.skip_ranks))

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> ProbeForm:
        return cls(**{f.name: values[f.name] for f in fields(cls) if values.get(f.name) is not None}).validate()

    @classmethod
    def from_words(cls, words: str) -> ProbeForm:
        return cls.from_values(parse_words(words, PROBE_FLAGS))


PROBE_FLAGS = (
    Flag(("--nproc",), "nproc", N_("ranks for --rendezvous (default: one per GPU, or 2 on CPU)"), positive_int, "N"),
    Flag(("--timeout",), "timeout", N_("seconds to wait for every rank to join (default 30)"), seconds, "S"),
    Flag(("--skip-rank",), "skip_ranks", N_("tell rank R not to join (to see what a missing rank looks like); "
            "repeatable"), rank_number, "R", repeat=True),
    Flag(("--backend",), "backend", N_("backend for --rendezvous (default auto)"), None, "{auto,nccl,gloo}", BACKENDS),
)
