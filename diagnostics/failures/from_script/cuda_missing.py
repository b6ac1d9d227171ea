"""The CUDA-missing failures (no driver, NCCL without a GPU, a device index that does not exist) told
from the user's own line, with a fix that is never what the failed run already did.

A run that used gloo and still died in `torch.cuda.set_device` was not saved by `--backend gloo`:
the script itself asks for CUDA. So the finding names the last frame of the traceback that is in the
user's file ("your script asks for CUDA at demo.py:12 (`torch.cuda.set_device(local_rank)`)") and
points at `mgtutor check --fix`, which writes the CPU branch (tui shows the patch itself).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mgtutor.diagnostics.failures.from_script.backend_variable import explain_backend_variable
from mgtutor.training.foundation.i18n import _, sentences

from mgtutor.training.foundation.safe_io import open_regular

Finding = Any  # classify.Finding; that module calls this one, so this one does not import it

CUDA_KINDS = ("no_cuda_driver", "nccl_without_gpu", "invalid_device_ordinal")
FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>\S+)')
RANK_PREFIX = re.compile(r"^\[(?:default)?rank\d+\]:\s?")
LIBRARY_PARTS = ("site-packages", "dist-packages", "/lib/python", "<frozen", "/torch/")
MAX_LOG_BYTES = 4_000_000


def user_frame(log: Path, script: str | None) -> dict[str, Any] | None:
    """The last traceback frame in the user's code: the script itself if it appears, else the last
    frame outside Python's and the libraries' own files."""
    try:
        with open_regular(log) as handle:  # a FIFO is never waited on
            text = handle.read(MAX_LOG_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None
    lines = [RANK_PREFIX.sub("", line) for line in text.splitlines()]
    frames: list[dict[str, Any]] = []
    for index, line in enumerate(lines):
        match = FRAME.search(line)
        if match:
            code = lines[index + 1].strip() if index + 1 < len(lines) else ""
            frames.append({"file": match["file"], "line": int(match["line"]), "function": match["function"],
                           "code": "" if FRAME.search(code) else code})
    mine = [f for f in frames if script and _same_file(f["file"], script)]
    if mine:
        return mine[-1]
    users = [f for f in frames if not any(part in f["file"] for part in LIBRARY_PARTS)]
    return users[-1] if users else None


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve() or Path(a).name == Path(b).name and a.endswith(b.lstrip("./"))
    except OSError:
        return a == b


def explain(findings: list[Finding], record: Any) -> list[Finding]:
    """Each CUDA-missing finding gets the user's line and a fix that does not repeat the run's own
    flags; the others pass through unchanged."""
    meta = record.meta()
    script = next((t for t in meta.target if t.endswith(".py")), None)
    if script and meta.cwd and not Path(script).is_absolute():
        script = str(Path(meta.cwd) / script)
    ran_gloo = meta.backend == "gloo"
    for finding in findings:
        if finding.kind not in CUDA_KINDS:
            continue
        frame = frame_for(record, finding.rank, script)
        if frame is None:
            if ran_gloo and finding.kind == "no_cuda_driver":  # the catalogue's fix ends with "--backend gloo"
                finding.fix = _("The run already used gloo, yet something asked for a GPU: find the CUDA call in "
                                "the traceback (your script, or a library it calls) and give it a CPU branch "
                                "(torch.cuda.is_available() decides); `mgtutor check --fix SCRIPT` writes the ones "
                                "it finds in the script.")
            continue
        finding.script_frame = frame
        if finding.kind == "nccl_without_gpu" and explain_backend_variable(finding, frame, record):
            continue  # NCCL named through a variable: its line and the script's own override
        where = f"{Path(frame['file']).name}:{frame['line']}"
        code = f" (`{frame['code']}`)" if frame["code"] else ""
        finding.summary = sentences(_("Your script asks for CUDA at {where}{code}.").format(where=where, code=code),
                                    finding.summary)
        finding.fix = _fix_text(finding, frame, ran_gloo)
    return findings


def frame_for(record: Any, rank: int | None, script: str | None) -> dict[str, Any] | None:
    """The user's frame in `rank`'s traceback (else another rank's): where the script failed."""
    logs = [(r, path) for r, stream, path in record.rank_logs() if stream == "stderr"]
    ordered = [p for r, p in logs if r == rank] + [p for r, p in logs if r != rank]
    for path in ordered:
        frame = user_frame(path, script)
        if frame is not None:
            return frame
    return None


def _fix_text(finding: Finding, frame: dict[str, Any], ran_gloo: bool) -> str:
    name, line = frame["file"], frame["line"]
    if finding.kind == "nccl_without_gpu":
        return _("The script chooses NCCL itself at line {line}, so no launcher flag changes it. Let it choose by "
                 "the hardware (\"nccl\" if torch.cuda.is_available() else \"gloo\"): `mgtutor check --diff {name}` "
                 "shows the patch, `mgtutor check --fix {name}` writes it.").format(line=line, name=name)
    if finding.kind == "invalid_device_ordinal":
        return _("Use LOCAL_RANK (not RANK) as the device index at line {line}, and start at most one rank per "
                 "visible GPU; on a machine without enough GPUs add the CPU branch: `mgtutor check --diff {name}` "
                 "shows the patch, `mgtutor check --fix {name}` writes it.").format(line=line, name=name)
    text = _("The script asks for a GPU at line {line} with no CPU branch. Keep the GPU path and add the CPU one "
             "(torch.cuda.is_available() decides): `mgtutor check --diff {name}` shows the patch, "
             "`mgtutor check --fix {name}` writes it. On a machine that should have GPUs, check `nvidia-smi` and "
             "that the container sees them.").format(line=line, name=name)
    return sentences(_("The run already used gloo."), text) if ran_gloo else text
