"""A normal (non-editable) install must carry every package and data folder: the editable install
used in development finds files a wheel would leave out."""
from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CONFIG = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def _folders() -> dict[str, Path]:
    return {name: REPO / path for name, path in CONFIG["package-dir"].items()}


def test_every_folder_with_an_init_is_a_listed_package() -> None:
    found = set()
    for name, root in _folders().items():
        for init in root.rglob("__init__.py"):
            rel = init.parent.relative_to(root)
            if "__pycache__" not in rel.parts and not any(p[:2].isdigit() for p in rel.parts):
                found.add(".".join((name, *rel.parts)) if rel.parts else name)
    assert found - set(CONFIG["packages"]) == set()


def test_python_files_outside_packages_are_package_data() -> None:
    """A folder of .py files without __init__ (the stack hook) ships only as package data."""
    data = CONFIG["package-data"]
    roots = set(_folders().values())
    for name, root in _folders().items():
        if name == "mgtutor.lessons":
            continue  # lesson folders ship whole ("**/*")
        for script in root.rglob("*.py"):
            if (script.parent / "__init__.py").exists() or "__pycache__" in script.parts:
                continue
            if script.parent in roots:
                continue  # a module of a listed package's own folder (mgtutor/__main__.py)
            package = ".".join((name, *script.parent.parent.relative_to(root).parts))
            pattern = f"{script.parent.name}/*.py"
            assert pattern in data.get(package, []), f"{script} is not shipped: add {pattern!r} to {package}"


def test_json_data_beside_a_package_module_ships() -> None:
    """The data a package loads with importlib.resources (check's rules.json, the failure catalogue)."""
    from fnmatch import fnmatch

    data = CONFIG["package-data"]
    for name, root in _folders().items():
        if name == "mgtutor.lessons":
            continue  # lesson folders ship whole ("**/*")
        for found in root.rglob("*.json"):
            if not (found.parent / "__init__.py").exists() or "__pycache__" in found.parts:
                continue
            package = ".".join((name, *found.parent.relative_to(root).parts))
            assert any(fnmatch(found.name, pattern) for pattern in data.get(package, [])), \
                f"{found} is not shipped: add '*.json' to {package}"
