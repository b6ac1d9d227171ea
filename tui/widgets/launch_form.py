"""The launch form: the built-in trainer or a script of your own, on N ranks; shows the command.

`build_launch(values)` is the form's logic without widgets: it checks the values and returns the
LaunchSpec plus the equivalent `mgtutor run` command line, or raises FormError with one line.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Button, Input, Label, Select, Static
from textual.widgets._select import SelectOverlay

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.training.runs.launch.launcher import BACKENDS, LaunchSpec
from mgtutor.tui.options.flags import OptionError
from mgtutor.tui.options.launch import LaunchOptions
from mgtutor.training.runs.launch.train_options import AMP_MODES, COMPILE_MODES, DATASETS, INJECT_MODES, MODELS, TRAINER_MODULE


class FormError(ValueError):
    """A value the form cannot launch with; the message says what to type instead."""


@dataclass
class FormValues:
    kind: str = "builtin"  # builtin | script
    model: str = "tinycnn"
    data: str = "synthetic"
    data_dir: str = ""
    batch_size: str = "32"
    steps: str = "40"
    log_every: str = "2"
    amp: str = "auto"
    compile: str = "auto"
    script: str = ""
    script_args: str = ""
    nproc: str = "2"
    backend: str = "auto"
    inject: str = "none"
    inject_rank: str = "1"
    nnodes: str = "1"
    node_rank: str = "0"
    rdzv_endpoint: str = ""
    extra: list[str] = field(default_factory=list)


def _positive(name: str, raw: str) -> int:
    raw = raw.strip()
    try:
        value = int(raw)
    except ValueError:
        raise FormError(_("{name} must be a whole number (got {value})").format(name=_(name), value=repr(raw))) from None
    if value < 1:
        raise FormError(_("{name} must be at least 1 (got {value})").format(name=_(name), value=value))
    return value


def build_launch(values: FormValues) -> tuple[LaunchSpec, str]:
    """The LaunchSpec and the equivalent command line, or FormError."""
    try:
        where = LaunchOptions.from_text(values.nproc, values.backend, values.nnodes, values.node_rank,
                                        values.rdzv_endpoint)
    except OptionError as exc:
        raise FormError(str(exc)) from None
    nproc = where.nproc
    if values.kind == "script":
        if not values.script.strip():
            raise FormError(_("give the path of your training script (or choose the built-in trainer)"))
        try:
            args = shlex.split(values.script_args)
        except ValueError as exc:
            raise FormError(_("script arguments: {why}").format(why=exc)) from None
        target = [values.script.strip(), *args]
        label = values.script.strip().rsplit("/", 1)[-1]
    else:
        if values.model not in MODELS:
            raise FormError(_("model must be one of {models}").format(models=", ".join(MODELS)))
        if values.data != "synthetic" and not values.data_dir.strip():
            raise FormError(_("data {data} needs a data folder (a local copy; nothing is downloaded) "
                              "— or choose synthetic").format(data=values.data))
        target = ["-m", TRAINER_MODULE, "--model", values.model, "--data", values.data,
                  "--batch-size", "auto" if values.batch_size.strip() == "auto" else  # the batch finder picks it
                  str(_positive(N_("batch size"), values.batch_size)),
                  "--steps", str(_positive(N_("steps"), values.steps)),
                  "--log-every", str(_positive(N_("log every"), values.log_every)),
                  "--amp", values.amp, "--compile", values.compile]
        if values.data != "synthetic":
            target += ["--data-dir", values.data_dir.strip()]
        if values.inject != "none":
            rank = values.inject_rank.strip()
            if not rank.isdigit():
                raise FormError(_("inject rank must be a rank number, 0 or more (got {value})").format(value=repr(rank)))
            if nproc is not None and int(rank) >= nproc:
                raise FormError(_("inject rank {rank} does not exist with {nproc} ranks (use 0…{last})").format(
                    rank=rank, nproc=nproc, last=nproc - 1))
            target += ["--inject", values.inject, "--inject-rank", rank]
        label = f"train-{values.model}"
    target += values.extra
    command_line = shlex.join(["mgtutor", "run", *where.command_args(), "--", *target])
    return LaunchSpec(target=target, label=label, instrument=True, **where.spec_fields()), command_line


def _select(options: tuple[str, ...] | list[tuple[str, str]], value: str, widget_id: str) -> Select[str]:
    pairs = [(o, o) if isinstance(o, str) else o for o in options]
    return Select(pairs, value=value, allow_blank=False, compact=True, id=widget_id)


class LaunchForm(VerticalScroll):
    """Every field on one line (compact widgets), so the form fits 80×24 with the command shown.

    Enter launches from any field (a Select's list opens with space or the arrows); Escape leaves a
    field for the form itself, where the mode keys (h, l, d…) work again."""

    BINDINGS = [
        Binding("enter", "launch", N_("Launch"), priority=True),  # before a Select opens its list or an Input submits
        Binding("escape", "leave_field", N_("Leave field"), show=False),
    ]

    class Submitted(Message):
        def __init__(self, spec: LaunchSpec, command: str) -> None:
            super().__init__()
            self.spec = spec
            self.command = command

    DEFAULT_CSS = """
    LaunchForm { height: 1fr; padding: 0 1; }
    LaunchForm .form-row { height: 1; margin-bottom: 0; }
    LaunchForm .form-row Label { width: 14; }
    LaunchForm .form-row Input, LaunchForm .form-row Select { width: 1fr; max-width: 48; }
    LaunchForm #form-command { margin-top: 1; color: $text-muted; height: auto; }
    LaunchForm #form-message { color: $error; height: auto; }
    LaunchForm #form-launch { margin-top: 1; }
    LaunchForm.-script .builtin-only, LaunchForm.-builtin .script-only { display: none; }
    LaunchForm.-one-node .multinode-only { display: none; }
    """

    def __init__(self, values: FormValues | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.initial = values or FormValues()

    def _row(self, label: str, widget: Select[str] | Input, group: str = "") -> Horizontal:
        return Horizontal(Label(_(label)), widget, classes=f"form-row {group}".strip())

    def compose(self) -> ComposeResult:
        v = self.initial
        yield Static(_("[b]Launch a run[/b]  enter: launch · tab: next field · space: open a list") + "\n[dim]"
                     + _("esc leaves a field; then h l d t r switch modes") + "[/dim]", id="form-title")
        yield self._row(N_("what"), _select([(_("built-in trainer"), "builtin"), (_("my own script"), "script")], v.kind, "f-kind"))
        yield self._row(N_("model"), _select(MODELS, v.model, "f-model"), "builtin-only")
        yield self._row(N_("data"), _select(DATASETS, v.data, "f-data"), "builtin-only")
        yield self._row(N_("data folder"), Input(v.data_dir, placeholder=_("only for cifar10/imagefolder"), compact=True, id="f-data-dir"), "builtin-only")
        yield self._row(N_("batch size"), Input(v.batch_size, compact=True, id="f-batch-size"), "builtin-only")
        yield self._row(N_("steps"), Input(v.steps, compact=True, id="f-steps"), "builtin-only")
        yield self._row(N_("log every"), Input(v.log_every, compact=True, id="f-log-every"), "builtin-only")
        yield self._row(N_("AMP"), _select(AMP_MODES, v.amp, "f-amp"), "builtin-only")
        yield self._row(N_("compile"), _select(COMPILE_MODES, v.compile, "f-compile"), "builtin-only")
        yield self._row(N_("failure drill"), _select(("none", *INJECT_MODES), v.inject, "f-inject"), "builtin-only")
        yield self._row(N_("… on rank"), Input(v.inject_rank, compact=True, id="f-inject-rank"), "builtin-only")
        yield self._row(N_("script"), Input(v.script, placeholder="path/to/train.py", compact=True, id="f-script"), "script-only")
        yield self._row(N_("arguments"), Input(v.script_args, placeholder="--epochs 1", compact=True, id="f-script-args"), "script-only")
        yield self._row(N_("ranks"), Input(v.nproc, placeholder=_("blank: one per GPU"), compact=True, id="f-nproc"))
        yield self._row(N_("backend"), _select(BACKENDS, v.backend, "f-backend"))
        yield self._row(N_("nodes"), Input(v.nnodes, placeholder=_("1: this machine only"), compact=True, id="f-nnodes"))
        yield self._row(N_("node rank"), Input(v.node_rank, compact=True, id="f-node-rank"), "multinode-only")
        yield self._row(N_("rdzv endpoint"), Input(v.rdzv_endpoint, placeholder=_("node 0's HOST:PORT"), compact=True,
                                               id="f-rdzv-endpoint"), "multinode-only")
        yield Static("", id="form-message")
        yield Static("", id="form-command")
        yield Button(_("Launch (enter)"), id="form-launch", variant="success", compact=True)

    def on_mount(self) -> None:
        self.refresh_command()

    def focus_first(self) -> None:
        self.query_one("#f-kind", Select).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "launch":
            focused = self.screen.focused
            # an open Select list takes Enter to pick its option
            return not (focused is not None and any(isinstance(n, SelectOverlay) for n in focused.ancestors_with_self))
        return True

    def action_launch(self) -> None:
        self.submit()

    def action_leave_field(self) -> None:
        self.focus()

    def values(self) -> FormValues:
        def get(widget_id: str) -> str:
            widget = self.query_one(f"#{widget_id}")
            value = widget.value  # type: ignore[attr-defined]
            return "" if value is None or value is Select.BLANK else str(value)

        return FormValues(kind=get("f-kind"), model=get("f-model"), data=get("f-data"), data_dir=get("f-data-dir"),
                          batch_size=get("f-batch-size"), steps=get("f-steps"), log_every=get("f-log-every"),
                          amp=get("f-amp"), compile=get("f-compile"), script=get("f-script"),
                          script_args=get("f-script-args"), nproc=get("f-nproc"), backend=get("f-backend"),
                          inject=get("f-inject"), inject_rank=get("f-inject-rank"), nnodes=get("f-nnodes"),
                          node_rank=get("f-node-rank"), rdzv_endpoint=get("f-rdzv-endpoint"),
                          extra=list(self.initial.extra))

    def refresh_command(self) -> tuple[LaunchSpec, str] | None:
        values = self.values()
        self.show_fields_for(values)
        try:
            spec, command = build_launch(values)
        except FormError as exc:
            self.show_message(str(exc))
            self.query_one("#form-command", Static).update("")
            return None
        self.show_message("")
        self.query_one("#form-command", Static).update(_("same as: {command}").format(command=command))
        return spec, command

    def show_fields_for(self, values: FormValues) -> None:
        """The rows of this kind of launch; the form's styles are worked out again only when they change
        (each change restyles every field, and every field's first value posts a change as the form mounts)."""
        wanted = {"-script": values.kind == "script", "-builtin": values.kind != "script",
                  "-one-node": values.nnodes.strip() in ("", "1")}
        if any(self.has_class(name) != on for name, on in wanted.items()):
            for name, on in wanted.items():
                self.set_class(on, name, update=False)
            self.update_node_styles()

    def show_message(self, message: str) -> None:
        self.query_one("#form-message", Static).update(message)

    def on_input_changed(self) -> None:
        self.refresh_command()

    def on_select_changed(self) -> None:
        self.refresh_command()

    def submit(self) -> None:
        built = self.refresh_command()
        if built is not None:
            self.post_message(self.Submitted(*built))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "form-launch":
            event.stop()
            self.submit()
