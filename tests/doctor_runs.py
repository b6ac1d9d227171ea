"""`mgtutor doctor` run once per test worker for every test that reads its output: in English as JSON,
in Chinese as text (--lang zh) and as JSON with the language from LANG. The doctor's facts come
from a torch child process (about 8 s on two cores); the tests that read them read the same run
(the `doctor_runs` fixture of conftest.py)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import homes_under, mgtutor_argv

RUNS = {
    "english json": (["doctor", "--json"], {}),
    "chinese text": (["--lang", "zh", "doctor"], {}),
    "chinese json from LANG": (["doctor", "--json"], {"LANGUAGE": "", "LANG": "zh_CN.UTF-8"}),
}


class DoctorRuns:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.done: dict[str, subprocess.CompletedProcess[str]] = {}

    def __getitem__(self, which: str) -> subprocess.CompletedProcess[str]:
        if which not in self.done:
            args, env = RUNS[which]
            homes = homes_under(self.home)
            self.done[which] = subprocess.run(mgtutor_argv(*args), capture_output=True, text=True, timeout=300,
                                              env={**os.environ, "LANGUAGE": "en", **homes, "MGTUTOR_NO_NVML": "1",
                                                   **env})
        return self.done[which]
