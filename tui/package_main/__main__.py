"""`python -m mgtutor`: the same command line as `mgtutor`.

This folder is where pyproject's package-dir puts the `mgtutor` namespace itself, so that it can
hold this one module; it has no __init__.py, so `mgtutor` stays a namespace over the four folders.
"""
from mgtutor.tui.cli import main

raise SystemExit(main())
