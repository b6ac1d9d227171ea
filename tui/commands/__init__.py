"""One module per subcommand. Each defines `register(subparsers)`, which adds its parser and sets
`func` to a function taking the parsed args and returning the exit code. Keep imports at the top of
these modules cheap: `mgtutor --help` imports all of them.
"""
from __future__ import annotations

COMMAND_MODULES = ["lessons", "doctor", "train", "run", "fit", "runs", "bench", "check", "convert", "diagnose", "demo", "cluster.slurm", "cluster.k8s", "report", "serve"]
