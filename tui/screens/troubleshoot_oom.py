"""Troubleshoot → Out of memory, answered with numbers: `b` finds the largest batch that fits on every rank,
for the newest run's own script (`mgtutor fit` on its command) or, after a run of the built-in trainer, for
the trainer (the batch finder); each trial is shown as it ends. The Monitor's OOM banner (B) sends its run
here (`FitScript`). `w` runs the newest run's script again with `--memory`, so that its OOM says what
filled the GPU and which lines allocated.

A mixin of TroubleshootScreen: it uses the screen's log, status line and fix cards."""
from __future__ import annotations

import os
import time
from typing import Any

from rich.markup import escape
from textual import work

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.diagnostics.bench.fit_plan import FitError, plan_for_run
from mgtutor.diagnostics.bench.fit_words import answer_lines, trial_line
from mgtutor.diagnostics.bench.maxbatch import FinderOptions, run_finder
from mgtutor.diagnostics.bench.scriptfit import FitSearch, FitTrial, command_for
from mgtutor.diagnostics.bench.scripttrial import TrialPlan, fit_script
from mgtutor.diagnostics.failures.logs.logparse import clean
from mgtutor.diagnostics.failures.oom.explain import memory_lines
from mgtutor.diagnostics.failures.oom.rerun import rerun_with_memory
from mgtutor.training.runs.nvml import inventory
from mgtutor.training.runs.records.record import list_runs
from mgtutor.diagnostics.failures.symptoms import SYMPTOMS
from mgtutor.training.runs.launch.launcher import Run
from mgtutor.tui.messages import FitScript, RunStarted
from mgtutor.tui.screens.from_thread import call_on_screen

OOM_SYMPTOM = "oom"
FAKE_ENV = "MGTUTOR_FAKE_CUDA_MEMORY"  # the tests' stand-in at the CUDA boundary
OOM_HINT = N_("b: find the largest batch that fits (the newest run's script, with mgtutor fit) · w: run the "
               "newest run's script again with --memory (what filled the GPU)")


def last_trainer_model(scan: int = 20) -> tuple[str, int]:
    """The model and image size of the newest run of the built-in trainer (resnet50 at 224 when none)."""
    for record in list(list_runs())[:scan]:
        try:
            target = record.meta().target
        except (OSError, ValueError, TypeError, AttributeError):
            continue
        if "mgtutor.training.worker.train" in target:
            def value(flag: str, default: str) -> str:
                return target[target.index(flag) + 1] if flag in target[:-1] else default
            try:
                return value("--model", "tinycnn"), int(value("--image-size", "32"))
            except ValueError:
                break
    return "resnet50", 224


class OomActions:
    """action_find_batch and action_memory_rerun for TroubleshootScreen (bindings b and w)."""

    symptom: Any
    busy: bool
    app: Any

    def _oom_ready(self) -> bool:
        if self.symptom is None or self.symptom.key != OOM_SYMPTOM:
            self.set_status(_("b and w answer Out of memory: pick that symptom first"))  # type: ignore[attr-defined]
            return False
        if self.busy:
            return False
        self.busy = True
        log = self.query_one("#ts-log")  # type: ignore[attr-defined]
        log.clear()
        log.display = True
        self.show_findings([])  # type: ignore[attr-defined]
        return True

    def action_find_batch(self) -> None:
        if not self._oom_ready():
            return
        if not os.environ.get(FAKE_ENV) and not inventory().gpus:
            self.busy = False
            no_gpu = _("the batch finder measures GPU memory, and no NVIDIA GPU was found")
            self.set_status(f"[yellow]{no_gpu}[/]")  # type: ignore[attr-defined]
            return
        newest = next(iter(list_runs()), None)
        if newest is not None and self._fit(newest):
            return
        model, size = last_trainer_model()
        self.set_status(_("batch finder running for {model} at {size}×{size}: every rank tries each batch; "  # type: ignore[attr-defined]
                          "trials below as they end…").format(model=model, size=size))
        self.find_batch_worker(FinderOptions(model=model, image_size=size, prove_steps=10))

    def on_fit_script(self, message: FitScript) -> None:
        """The Monitor's OOM banner asked (B): Out of memory, and `mgtutor fit` on that run's command."""
        self.symptom = next(s for s in SYMPTOMS if s.key == OOM_SYMPTOM)
        self.query_one("#ts-symptoms").highlighted = [s.key for s in SYMPTOMS].index(OOM_SYMPTOM)  # type: ignore[attr-defined]
        if self._oom_ready():
            self._fit(message.record, explicit=True)

    def _fit(self, record: Any, explicit: bool = False) -> bool:
        """Start `mgtutor fit` on the run's command; False (unless `explicit`) where the run was not a script of
        the user's: the built-in trainer's batch finder answers for its runs."""
        try:
            mine = not record.meta().speaks_events()
        except (OSError, ValueError, AttributeError):
            mine = False
        if not (mine or explicit):
            return False
        try:
            plan = plan_for_run(record)
        except (FitError, OSError, ValueError) as exc:
            self.busy = False
            self.set_status("[yellow]" + escape(str(exc)) + "[/]")  # type: ignore[attr-defined]
            return True
        target = escape(" ".join(plan.target)[:80])
        self.set_status(_("mgtutor fit on {target}: each trial runs it for {steps} optimizer steps; trials below "  # type: ignore[attr-defined]
                          "as they end…").format(target=target, steps=plan.steps))
        self.fit_script_worker(plan)
        return True

    @work(thread=True, exclusive=True, group="ts-oom")
    def fit_script_worker(self, plan: TrialPlan) -> None:
        search, worlds = FitSearch(), []

        def on_trial(trial: FitTrial) -> None:
            call_on_screen(self, self._write_lines, [trial_line(len(search.trials), trial)])  # type: ignore[attr-defined]

        def on_start(run: Run) -> None:
            worlds.append(run.record.meta().world_size or 1)
            self.post_message(RunStarted(run))  # type: ignore[attr-defined]

        try:
            answer = fit_script(plan, search, on_trial=on_trial, on_start=on_start)
        except Exception as exc:  # a launch that cannot start, no device memory: said on screen
            call_on_screen(self, self._oom_done, "[red]" + _("mgtutor fit stopped: {why}").format(
                why=escape(str(exc))) + "[/]")
            return
        command = command_for(plan.target, answer.recommended, worlds[0] if worlds else 1, plan.option,
                              plan.accumulation) if answer.largest else None
        call_on_screen(self, self._write_lines, answer_lines(answer, command, plan.nproc, plan.steps))  # type: ignore[attr-defined]
        status = (_("mgtutor fit: [b]{option} {batch}[/b] per rank trains on every rank (largest {largest})").format(
                      option=plan.option.flag, batch=command.per_rank, largest=answer.largest) if command else
                  "[red]" + escape(answer.error or _("no batch trains on every rank")) + "[/]")
        call_on_screen(self, self._oom_done, status)

    def action_memory_rerun(self) -> None:
        if not self._oom_ready():
            return
        record = next(iter(list_runs()), None)
        if record is None:
            self.busy = False
            no_runs = _("no runs yet: start your script from the Monitor or with mgtutor run")
            self.set_status(f"[yellow]{no_runs}[/]")  # type: ignore[attr-defined]
            return
        target = escape(" ".join(record.meta().target)[:80])
        self.set_status(_("running {target} again with --memory…").format(target=target))  # type: ignore[attr-defined]
        self.memory_rerun_worker(record)

    def _line_sink(self) -> Any:
        pending: list[str] = []
        last = [time.monotonic()]

        def on_line(rank: int | None, line: str) -> None:
            pending.append(f"{'[torchrun]' if rank is None else f'[rank {rank}]'} {clean(line)}")
            if "batch finder:" in line or time.monotonic() - last[0] > 0.2:  # a trial shows at once
                call_on_screen(self, self._write_lines, pending[:])  # type: ignore[attr-defined]
                pending.clear()
                last[0] = time.monotonic()

        def flush() -> None:
            call_on_screen(self, self._write_lines, pending[:])  # type: ignore[attr-defined]

        return on_line, flush

    @work(thread=True, exclusive=True, group="ts-oom")
    def find_batch_worker(self, options: FinderOptions) -> None:
        on_line, flush = self._line_sink()
        try:
            run, found = run_finder(options, on_line=on_line, on_start=lambda r: self.post_message(RunStarted(r)))  # type: ignore[attr-defined]
        except Exception as exc:  # a launch that cannot start says why on screen
            call_on_screen(self, self._oom_done, "[red]" + _("the batch finder could not start: {why}").format(
                why=escape(str(exc))) + "[/]")
            return
        flush()
        call_on_screen(self, self._write_lines, found.summary_lines())  # type: ignore[attr-defined]
        r = found.result
        status = (_("batch finder (run {run_id}): [b]--batch-size {batch}[/b] per rank; measured maximum {maximum}; "
                    "{per_sample:.2f} MiB per sample, {fixed:.2f} GiB fixed").format(
                      run_id=run.record.run_id, batch=r.chosen_batch, maximum=r.measured_max,
                      per_sample=r.per_sample_bytes / (1 << 20), fixed=r.fixed_bytes / (1 << 30)) if r else
                  _("[red]the batch finder gave no answer[/] (run {run_id}; its log is above)").format(
                      run_id=run.record.run_id))
        call_on_screen(self, self._oom_done, status)

    @work(thread=True, exclusive=True, group="ts-oom")
    def memory_rerun_worker(self, record: Any) -> None:
        on_line, flush = self._line_sink()
        try:
            run, findings = rerun_with_memory(record, on_line=on_line,
                                              on_start=lambda r: self.post_message(RunStarted(r)))  # type: ignore[attr-defined]
        except Exception as exc:  # RerunError, or a launch that cannot start: said on screen
            call_on_screen(self, self._oom_done, "[red]" + _("could not run it again: {why}").format(
                why=escape(str(exc))) + "[/]")
            return
        flush()
        top = findings[0] if findings else None
        memory = (top.numbers or {}).get("memory") if top is not None else None
        if memory:
            call_on_screen(self, self._write_lines, memory_lines(memory))  # type: ignore[attr-defined]
        found = _("{count} finding(s) below").format(count=len(findings)) if findings else \
            _("it ended without a failure")
        call_on_screen(self, self._oom_done, _("--memory run {run_id}: {found}").format(
            run_id=run.record.run_id, found=found), findings)

    def _oom_done(self, status: str, findings: list[Any] | None = None) -> None:
        self.busy = False
        self.set_status(status)  # type: ignore[attr-defined]
        if findings:
            self.show_findings(findings)  # type: ignore[attr-defined]
