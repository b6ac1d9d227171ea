# Sets the training script's globals from the command line, the way nanoGPT's configurator.py does: the
# script runs this file with exec(), so `--name=value` replaces the global `name` it finds there.
import sys
from ast import literal_eval

for arg in sys.argv[1:]:
    assert arg.startswith("--") and "=" in arg, f"expected --name=value, got {arg}"
    key, val = arg.split('=')
    key = key[2:]
    assert key in globals(), f"unknown config key: {key}"
    try:
        globals()[key] = literal_eval(val)
    except (SyntaxError, ValueError):
        globals()[key] = val
    print(f"config: {key} = {globals()[key]!r}")
