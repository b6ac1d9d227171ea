"""Turn `py-spy dump --json --locals` into py-spy's own text layout, keeping only the locals that matter.

Why not save py-spy's text directly: with `--locals` it prints every local of every frame (large
reprs, and nothing a hang report needs); without it, the world size that `init_process_group` waits
for is lost. The text stays the layout people know from `py-spy dump`, so one parser reads both.
"""
from __future__ import annotations

from typing import Any

NATIVE = "[native]"  # marks a native frame; readers of Python frames skip these lines
# the few arguments that say what a rank waits for; everything else is dropped
KEPT_LOCALS = frozenset({"world_size", "rank", "group_size", "group_rank", "backend", "init_method", "op",
                         "timeout", "group_desc"})
KEPT_IN = frozenset({"init_process_group", "_new_process_group_helper", "_env_rendezvous_handler",
                     "_create_c10d_store", "rendezvous"})


def render_pyspy_json(threads: list[dict[str, Any]]) -> str:
    """`Thread <tid> (<state>): "<name>"` and one indented `function (file:line)` per frame."""
    lines: list[str] = []
    for thread in threads:
        tid = thread.get("os_thread_id") or thread.get("thread_id")
        state = "active" if thread.get("active") else "idle"
        if thread.get("owns_gil"):
            state += "+gil"
        name = thread.get("thread_name") or ""
        lines.append(f'Thread {tid} ({state}): "{name}"')
        for frame in thread.get("frames") or []:
            if frame.get("module"):  # a native frame (--native): the library it is in, a line where known
                line = f":{frame['line']}" if frame.get("line") else ""
                lines.append(f"    {NATIVE} {frame.get('name')} ({frame.get('short_filename') or frame['module']}{line})")
                continue
            lines.append(f"    {frame.get('name')} ({frame.get('filename')}:{frame.get('line')})")
            if frame.get("name", "").rsplit(".", 1)[-1] in KEPT_IN:
                kept = [v for v in frame.get("locals") or [] if v.get("name") in KEPT_LOCALS and v.get("arg")]
                if kept:
                    lines.append("        Arguments:")
                    lines += [f"            {v['name']}: {str(v.get('repr'))[:80]}" for v in kept]
    return "\n".join(lines) + "\n"
