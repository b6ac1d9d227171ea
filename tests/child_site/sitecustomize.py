"""Loaded first by every Python process the suite starts (conftest.py puts this folder on PYTHONPATH): the CLI,
torchrun, each rank (mgtutor's stack hook imports it after its own), the app in a terminal.

Why: the suite's real runs spend most of their CPU importing torch, and torch._dynamo that DDP's constructor
imports, about 3.5 CPU seconds a rank; those imports make hundreds of thousands of objects that live to the
end, and the garbage collector walks them again and again on the way (default: a collection every 700
allocations). While those two modules are imported, and only then, it collects every 50,000 allocations;
before and after, the process collects as a user's does (a run's teardown depends on it: gloo's objects
left to the end of a spawned rank aborted it once, when the whole process collected less often).

Once `import torch` is done, everything alive is frozen (gc.freeze): later collections, the last one at exit
included, no longer walk torch's own modules and functions (about 0.1-0.25 CPU s a process). Only torch's
import: at torch._dynamo's, which DDP's or an optimizer's constructor starts, the script's own objects (the model,
the process group) are alive, and frozen they would never be collected.

A sitecustomize later on the path (tests/bench/proc_cpu's, a venv's) is still imported after this one."""
import gc
import os
import sys

_IMPORTS = {"torch", "torch._dynamo"}
_WHILE_IMPORTING = (50_000, 100, 100)


class _CollectLessWhileImporting:
    """The loader the other finders found, its module run with the collector's threshold raised."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        if getattr(module, "__spec__", None) is not None:  # the module sees its own loader, as without this
            module.__spec__.loader = self.loader
        module.__loader__ = self.loader
        before = gc.get_threshold()
        gc.set_threshold(*_WHILE_IMPORTING)
        try:
            self.loader.exec_module(module)
        finally:
            gc.set_threshold(*before)
            if module.__name__ == "torch":
                gc.freeze()

    def __getattr__(self, name):
        return getattr(self.loader, name)


class _AwaitImports:
    """Finds nothing itself: at the first import of each of _IMPORTS it lets the other finders find it and wraps
    their loader; it leaves `sys.meta_path` once both were seen."""

    def find_spec(self, name, path=None, target=None):
        if name not in _IMPORTS:
            return None
        _IMPORTS.discard(name)
        if not _IMPORTS and self in sys.meta_path:
            sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _CollectLessWhileImporting(spec.loader)
        return spec

    def invalidate_caches(self):
        pass


sys.meta_path.insert(0, _AwaitImports())

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
