"""A worker thread hands its result to a screen on the app's loop; by the time it lands, the screen may have
left the app (the app quitting, the screen closed), its widgets already removed."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any


def call_on_screen(node: Any, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """From a worker thread: `callback(*args, **kwargs)` on the app's loop, unless the app is shutting down or `node`
    has left it by then: there is nothing left to show the result on (a query for one of its widgets would fail the
    worker and with it the app, as it did when the app quit while the doctor's check was ending). `node`: a screen or
    widget (Any: the screens' mixins that call this are not typed as nodes)."""
    try:
        app = node.app  # found through the node's parents: a node that has left the app has none
    except RuntimeError:  # textual's NoActiveAppError
        return

    def while_attached() -> None:
        if app.is_running and node.is_attached:  # is_running: false from the start of the app's shutdown
            callback(*args, **kwargs)

    if app.is_running:
        app.call_from_thread(while_attached)
