"""The files a training script imports from its own project, found the way Python would find them.

A script run as `python train.py` (or under torchrun) imports `utils`, `util.misc` or `timm.utils`
from its own folder first. The checker reads those modules — never imports or runs them — so a rule
can follow a call into a helper (`utils.init_distributed_mode(args)`) before it speaks. Anything
that does not resolve to a file under the root (an installed package, dynamic imports) stays unknown.
"""
from __future__ import annotations

import ast
import warnings
from pathlib import Path

from mgtutor.diagnostics.check.script_model import ScriptModel
from mgtutor.training.foundation.safe_io import read_regular

MAX_MODULE_BYTES = 2_000_000
MAX_FILES = 400          # a project folder beyond this is a library checkout, not a training project
SKIP_DIRS = {".git", ".venv", "venv", "env", "__pycache__", "node_modules", "build", "dist", ".tox", "site-packages"}


class Project:
    """One root folder; parsed modules cached by path. `load` is the only place files are read."""

    def __init__(self, folder: Path) -> None:
        root = folder.resolve()
        while (root / "__init__.py").is_file() and root.parent != root:
            root = root.parent  # a package's modules import each other by its name, from its parent up
        self.root = root
        self._models: dict[Path, ScriptModel | None] = {}
        # follow's answers per (question, file, function line): (the function holds it, the calls it makes)
        self.memo: dict[tuple[str, str, int], tuple[bool, list[ast.Call]]] = {}

    def load(self, path: Path, source: str | None = None) -> ScriptModel | None:
        path = path.resolve()
        if path not in self._models:
            self._models[path] = _parse(path, source, self)
        return self._models[path]

    def cached(self, path: Path) -> ScriptModel | None:
        return self._models.get(path.resolve())

    def remember(self, model: ScriptModel, path: Path) -> None:
        self.attach(model, path)
        self._models[path.resolve()] = model

    def loaded(self) -> list[ScriptModel]:
        return [m for m in self._models.values() if m is not None]

    def attach(self, model: ScriptModel, path: Path) -> None:
        """Let a model's rules follow calls into this project; its relative imports become names."""
        model.project = self
        here = self.module_name(path) or ""
        for node in model.nodes:  # `from .distributed import f`: ScriptModel's aliases skip relative imports
            if isinstance(node, ast.ImportFrom) and node.level:
                base = _absolute(here, node.module, node.level, path.name == "__init__.py")
                for a in node.names:
                    if base and a.name != "*":
                        model.aliases.setdefault(a.asname or a.name, f"{base}.{a.name}")

    def module_path(self, dotted_name: str) -> Path | None:
        """`util.misc` -> root/util/misc.py or root/util/misc/__init__.py, if it is there."""
        parts = dotted_name.split(".")
        if not all(p.isidentifier() for p in parts):
            return None
        base = self.root.joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None

    def module(self, dotted_name: str) -> ScriptModel | None:
        path = self.module_path(dotted_name)
        return self.load(path) if path else None

    def module_name(self, path: Path) -> str | None:
        try:
            rel = path.resolve().relative_to(self.root).with_suffix("")
        except ValueError:
            return None
        parts = list(rel.parts)
        if parts and parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts) or None

    def function(self, qualified: str, depth: int = 0) -> tuple[ScriptModel, ast.AST] | None:
        """`util.misc.init_distributed_mode` -> its module and def, following `from .x import f`
        re-exports in a package's __init__.py."""
        if depth > 4 or "." not in qualified:
            return None
        module_name, _, name = qualified.rpartition(".")
        model = self.module(module_name)
        if model is None:
            return None
        for node in model.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return model, node
        target = model.aliases.get(name) or _relative_import(model, module_name, name, self)
        if target and target != qualified:
            return self.function(target, depth + 1)
        return None

    def imported_files(self, model: ScriptModel) -> list[Path]:
        """Project files this module imports (directly), in import order."""
        found: list[Path] = []
        here = self.module_name(Path(model.filename)) or ""
        for node in model.nodes:
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(here, node.module, node.level, Path(model.filename).name == "__init__.py")
                if base is None:
                    continue
                names = [base] + [f"{base}.{a.name}" for a in node.names if a.name != "*"]
            for name in names:
                path = self.module_path(name)
                if path and path not in found:
                    found.append(path)
        return found

    def closure(self, scripts: list[Path], within: Path) -> list[Path]:
        """The scripts and every module under `within` they import, transitively (bounded)."""
        order: list[Path] = []
        queue = [p.resolve() for p in scripts]
        within = within.resolve()
        while queue and len(order) < MAX_FILES:
            path = queue.pop(0)
            if path in order or not path.is_relative_to(within):
                continue
            order.append(path)
            model = self.load(path)
            if model is not None:
                queue.extend(p.resolve() for p in self.imported_files(model))
        return order


def entry_scripts(folder: Path) -> list[Path]:
    """The scripts of a project folder: its top-level .py files (any may be the one that is run;
    modules in sub-folders are checked when a script imports them)."""
    return sorted(p for p in folder.glob("*.py") if p.is_file())


def _parse(path: Path, source: str | None, project: Project) -> ScriptModel | None:
    try:
        if source is None:
            if path.stat().st_size > MAX_MODULE_BYTES:
                return None
            source = read_regular(path).decode("utf-8")  # a FIFO is never waited on
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(source, filename=str(path))
        model = ScriptModel(tree, source, str(path))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return None
    project.attach(model, path)
    return model


def _absolute(here: str, module: str | None, level: int, is_package: bool) -> str | None:
    if not level:
        return module
    parts = here.split(".") if here else []
    drop = level - 1 if is_package else level
    if drop > len(parts):
        return None
    base = parts[:len(parts) - drop]
    if module:
        base.append(module)
    return ".".join(base) or None


def _relative_import(model: ScriptModel, module_name: str, name: str, project: Project) -> str | None:
    """`from .distributed import init_distributed_device` in package/__init__.py (aliases skip
    relative imports), and `from .x import *`."""
    is_package = Path(model.filename).name == "__init__.py"
    for node in model.tree.body:
        if isinstance(node, ast.ImportFrom) and node.level:
            base = _absolute(module_name, node.module, node.level, is_package)
            for a in node.names:
                if base and (a.asname or a.name) == name:
                    return f"{base}.{a.name}"
                if base and a.name == "*" and project.function(f"{base}.{name}", depth=4) is not None:
                    return f"{base}.{name}"
    return None
