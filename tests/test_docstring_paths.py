"""Every file a docstring or comment of the package names exists: a move or rename that leaves the old
name in a docstring sends the next reader to a file that is not there."""
from __future__ import annotations

import ast
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OURS = ("tui", "lessons", "diagnostics", "training", "tests", "docs")
# a path (`training/runs/follow/session.py`) or a bare file name (`match/cuda.py`)
NAMED = re.compile(r"(?<![\w.-])((?:[\w.-]+/)*[\w-]+\.py)\b")


def words_of(path: Path) -> list[str]:
    source = path.read_text(encoding="utf-8")
    nodes = [node for node in ast.walk(ast.parse(source))
             if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    docstrings = [doc for node in nodes if (doc := ast.get_docstring(node))]
    comments = [line for line in source.splitlines() if line.strip().startswith("#")]
    return docstrings + comments


def missing(reference: str, files: set[str], names: set[str]) -> bool:
    if "/" in reference:
        return reference.split("/", 1)[0] in OURS and reference not in files
    stem = reference.removesuffix(".py")
    return not stem.isupper() and stem not in sys.stdlib_module_names and reference not in names  # THIS_FILE.py: a placeholder


def test_every_file_a_docstring_names_exists():
    files = set()
    for folder, subfolders, names in os.walk(REPO):
        subfolders[:] = [d for d in subfolders if not d.startswith(".") and d not in ("__pycache__", "build")]
        here = Path(folder).relative_to(REPO)
        files |= {str(here / name) for name in names + subfolders}
    names = {Path(f).name for f in files}
    sources = [p for folder in OURS[:4] for p in (REPO / folder).rglob("*.py") if "__pycache__" not in p.parts]
    wrong = [(str(p.relative_to(REPO)), ref) for p in sources for text in words_of(p)
             for ref in NAMED.findall(text) if missing(ref, files, names)]
    assert wrong == []
