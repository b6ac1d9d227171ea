"""The rendezvous probe with real torchrun ranks on gloo: all join; one told to stay away is named."""
from __future__ import annotations

import json
import subprocess

import pytest
from conftest import mgtutor_argv, no_gpu_env

pytestmark = pytest.mark.integration  # starts processes


def probe(*args: str) -> tuple[int, dict]:
    done = subprocess.run(mgtutor_argv("doctor", "--rendezvous", "--backend", "gloo", "--json", *args),
                          capture_output=True, text=True, env=no_gpu_env(), timeout=280)
    return done.returncode, json.loads(done.stdout)


def test_two_ranks_join_barrier_and_all_reduce():
    code, rep = probe("--nproc", "2", "--timeout", "60")
    assert code == 0 and rep["ok"] and rep["missing"] == []
    assert [r["status"] for r in rep["ranks"]] == ["joined", "joined"]
    assert all(r["joined_s"] > 0 and r["allreduce_s"] is not None for r in rep["ranks"])


def test_a_rank_that_never_joins_is_reported_exactly():
    code, rep = probe("--nproc", "3", "--timeout", "4", "--skip-rank", "1")
    assert code == 1 and not rep["ok"]
    assert rep["missing"] == [1]
    assert "rank 1 never joined within 4 s" in rep["message"]
    assert any("MASTER_ADDR" in line for line in rep["advice"])
    assert rep["ranks"][0]["status"] == "waiting" and rep["ranks"][2]["status"] == "waiting"
