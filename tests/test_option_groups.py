"""Option groups shared by a command and a screen: the same flags read by argparse (the CLI) and by
parse_words (a screen's input line) give the same options, and the same one-line errors."""
from __future__ import annotations

import argparse
import shlex

import pytest

from mgtutor.diagnostics.bench.allreduce_bench import BenchOptions
from mgtutor.tui.options.bench import BENCH_FLAGS, bench_options, bench_options_from_words
from mgtutor.tui.options.flags import OptionError, add_flags, parse_words
from mgtutor.tui.options.launch import LaunchOptions
from mgtutor.tui.options.probe import PROBE_FLAGS, ProbeForm

WORDS = "--nproc 2 --backend gloo -b 8 -e 1K -f 128 --iters 2 --warmup 1 --check --dtype half"


def cli_options(words: str) -> BenchOptions:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_flags(parser, BENCH_FLAGS, BenchOptions())
    return bench_options(vars(parser.parse_args(shlex.split(words))))


def test_the_cli_and_the_screen_read_the_same_bench_options():
    screen = bench_options_from_words(WORDS)
    assert screen == cli_options(WORDS)
    assert (screen.nproc, screen.max_bytes, screen.factor, screen.check, screen.dtype) == (2, 1024, 128.0, True, "half")
    assert screen.sizes("gloo") == [8, 1024]


@pytest.mark.parametrize("words, says", [
    ("-f 1", "-f must be more than 1"),
    ("-b 8M -e 1M", "is smaller than -b"),
    ("--nproc 0", "--nproc: must be a whole number of at least 1"),
    ("--backend mpi", "--backend must be one of auto, nccl, gloo"),
    ("--nproc", "--nproc needs a value"),
    ("--frobnicate", "unknown option '--frobnicate'"),
    ("-b 'unclosed", "cannot read the options"),
])
def test_bad_bench_options_are_one_line(words, says):
    with pytest.raises(OptionError, match=None) as caught:
        bench_options_from_words(words)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_probe_options_repeat_and_bound_skip_rank():
    form = ProbeForm.from_words("--timeout 5 --skip-rank 1 --skip-rank=0")
    assert form.skip_ranks == [1, 0] and form.timeout == 5.0
    with pytest.raises(OptionError, match="--skip-rank 3 is not a rank of this probe"):
        ProbeForm.from_words("--skip-rank 3").validate(world=2)
    assert parse_words("", PROBE_FLAGS) == {}


def test_launch_options_from_the_form_and_as_run_flags():
    one = LaunchOptions.from_text(nproc="", backend="auto")
    assert one.nproc is None and one.command_args() == []
    several = LaunchOptions.from_text("4", "gloo", "2", "1", "node0:29500")
    assert several.command_args() == ["--nproc", "4", "--backend", "gloo", "--nnodes", "2", "--node-rank", "1",
                                      "--rdzv-endpoint", "node0:29500"]
    assert several.spec_fields()["rdzv_endpoint"] == "node0:29500"
    for args, says in ((("x",), "ranks must be a whole number"), (("2", "auto", "2", "5", "h:1"), "node rank must be 0…1"),
                       (("2", "auto", "2", "0", ""), "rendezvous endpoint"), (("2", "mpi"), "backend must be one of")):
        with pytest.raises(OptionError) as caught:
            LaunchOptions.from_text(*args)
        assert says in str(caught.value), (args, str(caught.value))


def test_the_cli_prints_one_error_line_naming_the_command(capsys):
    from mgtutor.tui.cli import main

    assert main(["bench", "allreduce", "-f", "1", "--nproc", "2"]) == 2
    err = capsys.readouterr().err
    assert err == "mgtutor bench allreduce: error: -f must be more than 1 (got 1)\n"
