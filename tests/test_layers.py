"""The layers hold and no module imports another that imports it back.

The contracts live in pyproject.toml ([tool.importlinter]); CI also runs them as `lint-imports`.
Both checks read the import graph that grimp builds, where an import inside a function counts."""
from __future__ import annotations

from pathlib import Path

import grimp
import pytest
from importlinter import configuration
from importlinter.application.use_cases import lint_imports

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("mgtutor.tui", "mgtutor.lessons", "mgtutor.diagnostics", "mgtutor.training")


def test_the_import_contracts_hold() -> None:
    configuration.configure()
    # On failure the broken contracts and their import chains are in the captured output.
    assert lint_imports(config_filename=str(REPO / "pyproject.toml"), cache_dir=None, no_logo=True)


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_circles_even_through_lazy_imports() -> None:
    # Imports under `if TYPE_CHECKING:` never run, so they cannot make a circle.
    graph = grimp.build_graph(*PACKAGES, cache_dir=None, exclude_type_checking_imports=True)
    report = []
    for group in circles(graph):
        edges = [f"  {a} -> {b} (line {graph.get_import_details(importer=a, imported=b)[0]['line_number']})"
                 for a in group for b in sorted(graph.find_modules_directly_imported_by(a)) if b in group]
        report.append("circle of " + ", ".join(group) + ":\n" + "\n".join(edges))
    assert not report, "\n".join(report)


def test_a_lazy_import_inside_a_function_closes_a_circle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "lazycircle"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from lazycircle import b\n")
    (package / "b.py").write_text("def later():\n    from lazycircle import a\n    return a\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from lazycircle import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("lazycircle", cache_dir=None, exclude_type_checking_imports=True)
    assert circles(graph) == [["lazycircle.a", "lazycircle.b"]]
