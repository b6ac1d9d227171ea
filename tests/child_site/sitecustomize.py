"""Loaded first by every Python process the suite starts (conftest.py puts this folder on PYTHONPATH): the CLI,
torchrun, each rank (mgtutor's stack hook imports it after its own), the app in a terminal.

Why: the suite's real runs spend most of their CPU importing torch, and torch._dynamo that DDP's constructor
imports, about 3.5 CPU seconds a rank; those imports make hundreds of thousands of objects that live to the
end, and the garbage collector walks them again and again on the way (default: a collection every 700
allocations). A collection every 50,000 took about 0.6 of a two-rank run's 10.4 CPU seconds off. The
processes run the same code; only how often their cyclic garbage is collected differs.

A sitecustomize later on the path (tests/bench/proc_cpu's, a venv's) is still imported after this one."""
import gc
import os
import sys

gc.set_threshold(50_000, 100, 100)

_here = os.path.dirname(os.path.abspath(__file__))
_saved, _self = list(sys.path), sys.modules.pop("sitecustomize", None)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
try:
    import sitecustomize  # noqa: F401  (the next one on the path, if any)
except ImportError:
    pass
finally:
    sys.path[:] = _saved
    if _self is not None:
        sys.modules.setdefault("sitecustomize", _self)
