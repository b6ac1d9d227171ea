"""The monitor mid-run at 80×24 and 160×48: state, meters, charts and logs all fit and stay put."""
from __future__ import annotations

import pytest

from tests.snapshots.monitor_fixture_app import FixtureApp, show_fixture_run


@pytest.mark.integration
@pytest.mark.sweep
@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_monitor_mid_run(snap_compare, size, monkeypatch):
    monkeypatch.setenv("MGTUTOR_NO_NVML", "1")
    assert snap_compare(FixtureApp(), run_before=show_fixture_run, terminal_size=size)
