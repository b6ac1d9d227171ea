"""The options of an all-reduce bench: `mgtutor bench allreduce` flags and the Diagnostics input line."""
from __future__ import annotations

from dataclasses import fields
from typing import Any

from mgtutor.diagnostics.bench.allreduce_bench import BenchOptions
from mgtutor.diagnostics.bench.sizes import canonical_dtype, parse_size
from mgtutor.training.runs.launch.launcher import BACKENDS
from mgtutor.training.foundation.i18n import N_, _
from mgtutor.tui.options.flags import Flag, OptionError, parse_words, positive_int


def bench_options(values: dict[str, Any]) -> BenchOptions:
    """The bench's options from parsed flag values (argparse's or parse_words'), or OptionError."""
    options = BenchOptions(**{f.name: values[f.name] for f in fields(BenchOptions) if values.get(f.name) is not None})
    if options.factor <= 1:
        raise OptionError(_("-f must be more than 1 (got {factor:g})").format(factor=options.factor))
    if options.max_bytes is not None and options.max_bytes < options.min_bytes:
        raise OptionError(_("-e ({largest} B) is smaller than -b ({smallest} B)").format(largest=options.max_bytes,
                                                                                          smallest=options.min_bytes))
    return options


def bench_options_from_words(words: str) -> BenchOptions:
    return bench_options(parse_words(words, BENCH_FLAGS))


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise OptionError(_("must be a number (got {text!r})").format(text=text)) from None


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise OptionError(str(exc)) from None


BENCH_FLAGS = (
    Flag(("--nproc",), "nproc", N_("ranks (default: one per GPU, or 2 on CPU)"), positive_int, "N"),
    Flag(("--backend",), "backend", N_("backend (default auto)"), None, "{auto,nccl,gloo}", BACKENDS),
    Flag(("-b", "--minbytes"), "min_bytes", N_("smallest message (default 8)"), _size, "SIZE"),
    Flag(("-e", "--maxbytes"), "max_bytes", N_("largest message (default 256M on GPUs, 4M on CPU)"), _size, "SIZE"),
    Flag(("-f", "--stepfactor"), "factor", N_("size multiplier (default 2)"), _float, "F"),
    Flag(("-n", "--iters"), "iters", N_("timed iterations per size (default 20)"), positive_int, "N"),
    Flag(("-w", "--warmup"), "warmup", N_("untimed iterations per size (default 5)"), positive_int, "N"),
    Flag(("-d", "--dtype"), "dtype", N_("float, half, bfloat16, double, int8, uint8, int32, int64 (default float)"),
         canonical_dtype, "DTYPE"),
    Flag(("-c", "--check"), "check", N_("validate every result (#wrong column)")),
    Flag(("--graph",), "graph", N_("capture the timed calls in a CUDA graph (default auto: when capture works)"),
         None, "{auto,on,off}", ("auto", "on", "off")),
    Flag(("--oop",), "oop", N_("out-of-place method: NCCL called directly (like nccl-tests) or copy + in-place "
            "all_reduce"), None, "{auto,nccl,copy}", ("auto", "nccl", "copy")),
)
