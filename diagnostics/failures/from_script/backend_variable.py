"""NCCL asked for through a variable: `backend = 'nccl'` as a config default, passed on as
`init_process_group(backend=backend)` (nanoGPT's shape, overridden by its configurator), or an argparse
option's default. `mgtutor check --fix` rewrites a backend written in the call, not one kept in a variable,
and no launcher flag reaches it: the diagnosis names the variable and its line, and the script's own way
to change it from the command line, with the command that does.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from mgtutor.diagnostics.check.run_facts import BackendSource, backend_source, script_model
from mgtutor.diagnostics.failures.from_script.run_script import place, rerun_text
from mgtutor.training.foundation.i18n import _, sentences

Finding = Any  # classify.Finding (classify imports the module that calls this one)


def explain_backend_variable(finding: Finding, frame: dict[str, Any], record: Any) -> bool:
    """Rewrite a nccl_without_gpu finding whose init_process_group call (at `frame`, the user's line of the
    traceback) takes the backend from a variable; False, untouched, when it writes the backend itself."""
    path = Path(frame["file"])
    model = script_model(path)
    source = backend_source(model, int(frame["line"]), path) if model is not None else None
    if source is None or source.assignment is None:
        return False
    finding.summary = sentences(_summary(source, path, int(frame["line"])), finding.summary)
    finding.fix = _fix(source, record)
    return True


def _summary(source: BackendSource, path: Path, line: int) -> str:
    assignment = source.assignment
    assert assignment is not None
    if source.override is not None and source.override.how == "argparse":
        text = _("Your script takes the backend from `{variable}`, {value!r} by default ({where}: `{code}`), "
                 "and passes it to init_process_group at {call}.")
    else:
        text = _("Your script takes the backend from `{variable}`, set to {value!r} at {where} (`{code}`), and "
                 "passes it to init_process_group at {call}.")
    return text.format(variable=source.variable, value=assignment.value, where=place(path, assignment.line),
                       code=assignment.code, call=place(path, line))


def _fix(source: BackendSource, record: Any) -> str:
    assignment = source.assignment
    assert assignment is not None
    lead = _("No launcher flag changes a backend the script keeps in a variable, and `mgtutor check --fix` "
             "does not rewrite it.")
    override = source.override
    if override is None:
        return sentences(lead, _("Change line {line} (`{code}`) so a CPU run gets \"gloo\".").format(
            line=assignment.line, code=assignment.code), _choose(source))
    argument = " ".join(override.arguments("gloo"))
    if override.how == "configurator":
        how = _("The script's configurator (`{code}`, line {line}) sets its variables from `--name=value` "
                "arguments: run it with `{argument}`: `{command}`.")
    else:
        how = _("The script's option {flag} (line {line}) sets it: run it with `{argument}`: `{command}`.")
    return sentences(lead, how.format(code=override.code, line=override.line, flag=override.flag, argument=argument,
                                      command=rerun_text(record, *override.arguments("gloo"))), _choose(source))


def _choose(source: BackendSource) -> str:
    assignment = source.assignment
    assert assignment is not None
    if source.override is not None and source.override.how == "argparse":
        return _("Or let the option's default choose by the hardware: `default=\"nccl\" if "
                 "torch.cuda.is_available() else \"gloo\"`.")
    return _("Or let line {line} choose by the hardware: `{name} = \"nccl\" if torch.cuda.is_available() "
             "else \"gloo\"`.").format(line=assignment.line, name=assignment.name)
