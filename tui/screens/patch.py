"""The patch `mgtutor check --fix` would write, shown as a diff of the user's script; `a` writes it
after a confirmation. Opened from the Monitor's and Troubleshoot's check panels (F)."""
from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from mgtutor.training.foundation.i18n import N_, _
from mgtutor.diagnostics.check.fix.apply import FixReport, fix_file, write_text
from mgtutor.diagnostics.check.script import CheckError
from mgtutor.diagnostics.failures.logs.logparse import clean
from mgtutor.tui.screens.confirm import ConfirmScreen
from mgtutor.tui.screens.from_thread import call_on_screen

LINE_STYLE = {"+": "green", "-": "red", "@": "cyan"}


def diff_text(diff: str) -> Text:
    """The diff with + and - lines coloured; the script's text is shown, never interpreted."""
    text = Text()
    for line in diff.splitlines():
        text.append(clean(line) + "\n", LINE_STYLE.get(line[:1], "") if not line.startswith(("+++", "---")) else "bold")
    return text


def patch_summary(report: FixReport) -> str:
    if not report.changed:
        return _("{file}: nothing check --fix can rewrite safely").format(file=report.file)
    rules = ", ".join(sorted({a.rule for a in report.applied}))
    unsafe = [f for f in report.by_hand if f.fix_safety == "unsafe"]
    more = _("; {count} more with `mgtutor check --fix --unsafe-fixes`").format(count=len(unsafe)) if unsafe else ""
    return _("{file}: {count} safe fix(es) ({rules})").format(file=report.file, count=len(report.applied),
                                                             rules=rules) + more


class PatchScreen(ModalScreen[bool]):
    """Returns True when the patch was written."""

    BINDINGS = [Binding("a", "apply", N_("Apply")), Binding("escape", "close", N_("Close"))]
    DEFAULT_CSS = """
    PatchScreen .dialog { width: 100; max-width: 100%; max-height: 100%; }
    PatchScreen VerticalScroll { height: auto; max-height: 18; }
    """

    def __init__(self, report: FixReport) -> None:
        super().__init__()
        self.report = report
        self.plain = ""

    def compose(self) -> ComposeResult:
        body = diff_text(self.report.diff()) if self.report.changed else Text(_("no change"), "green")
        self.plain = f"{patch_summary(self.report)}\n{body.plain}"
        with Vertical(classes="dialog"):
            yield Static(patch_summary(self.report), id="patch-summary")
            with VerticalScroll():
                yield Static(body, id="patch-diff")
            yield Static(_("[b]a[/b] write it into the script (asks first) · [b]escape[/b] close"), id="patch-keys")

    def action_close(self) -> None:
        self.dismiss(False)

    def action_apply(self) -> None:
        if not self.report.changed:
            self.dismiss(False)
            return
        question = _("Write {count} fix(es) into {file}?\nThe diff shown is all it changes.").format(
            count=len(self.report.applied), file=self.report.file)
        self.app.push_screen(ConfirmScreen(question, yes=_("Write (y)"), no=_("Not now (n)")), self._decided)

    def _decided(self, yes: bool | None) -> None:
        if yes:
            self.write_patch()

    @work(thread=True, exclusive=True, group="patch-write")
    def write_patch(self) -> None:
        # The app, taken while this screen is shown: what is written is said even if the user closed the diff
        # meanwhile (a closed screen no longer finds its app).
        app, path = self.app, Path(self.report.file)
        try:
            data = path.read_bytes()
            if data.decode("utf-8", errors="replace") != self.report.before and \
                    fix_file(path).before != self.report.before:
                app.call_from_thread(app.notify, _("the script changed since this diff was made: open it again"),
                                     severity="warning")
                return
            write_text(path, self.report.after, data)
        except OSError as exc:
            app.call_from_thread(app.notify, _("could not write {path}: {why}").format(
                path=path, why=exc.strerror or exc), severity="error")
            return
        app.call_from_thread(app.notify, _("{name}: {count} fix(es) written").format(
            name=path.name, count=len(self.report.applied)))
        call_on_screen(self, self.dismiss, True)


class OffersPatch:
    """For a screen with a check panel: `show_patch_of(script)` reads the fixes in a thread and opens
    the PatchScreen; `patch_written()` is called after the user wrote them (check the script again)."""

    app: App

    def show_patch_of(self, script: str | Path) -> None:
        self._patch_worker(script)

    @work(thread=True, exclusive=True, group="patch")
    def _patch_worker(self, script: str | Path) -> None:
        try:
            report = fix_file(script)
        except CheckError as exc:
            call_on_screen(self, self._say_check_error, str(exc))
            return
        call_on_screen(self, self._show_patch, PatchScreen(report))

    # On the loop, once call_on_screen found this screen still shown: only then is its app looked up.
    def _say_check_error(self, message: str) -> None:
        self.app.notify(message, severity="warning")

    def _show_patch(self, patch: PatchScreen) -> None:
        self.app.push_screen(patch, self._patch_closed)

    def _patch_closed(self, written: bool | None) -> None:
        if written:
            self.patch_written()

    def patch_written(self) -> None:
        """The fixes are in the file now."""
