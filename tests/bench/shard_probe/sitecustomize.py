"""On PYTHONPATH with SHARD_PROBE_DIR set, this records what each process of a training job did, for the
corpus benchmark (tests/bench/corpus_runs.py) and the convert tests: the rank and world size it joined
with, the indices each DistributedSampler gave it (the whole epoch's list, read or not), a digest of the
first tensor of each forward of a DDP model while it trains (a script with no sampler), how many lines
it printed to stdout and which files it saved with torch.save or torchvision's save_image. Each process keeps its record in
$SHARD_PROBE_DIR/proc<pid>.json, rewritten at each event (a forked worker never runs atexit).
Nothing changes for the script: every call is passed on.

Python imports `sitecustomize` at start-up from the path; without SHARD_PROBE_DIR this does nothing.
"""
import builtins
import hashlib
import importlib.abc
import importlib.util
import json
import os
import sys

_OUT = os.environ.get("SHARD_PROBE_DIR")


def _install() -> None:
    import torch  # noqa: PLC0415 - only a probed job pays for it
    import torch.distributed as dist
    import torch.utils.data.distributed as distributed

    record: dict = {}

    def fresh() -> None:
        record.clear()
        record.update({"pid": os.getpid(), "rank": None, "world_size": None, "samplers": [], "prints": 0,
                       "saves": [], "inputs": []})

    def save() -> None:
        with open(os.path.join(_OUT, f"proc{os.getpid()}.json"), "w") as handle:
            json.dump(record, handle)

    fresh()
    os.register_at_fork(after_in_child=fresh)
    plain_print, plain_init, plain_iter, plain_save = (builtins.print, dist.init_process_group,
                                                       distributed.DistributedSampler.__iter__, torch.save)

    def counting_print(*args, **kwargs):
        if kwargs.get("file") is None:
            record["prints"] += 1
            save()
        return plain_print(*args, **kwargs)

    def recording_init(*args, **kwargs):
        result = plain_init(*args, **kwargs)
        record["rank"], record["world_size"] = dist.get_rank(), dist.get_world_size()
        save()
        return result

    def recording_iter(self):
        indices = list(plain_iter(self))
        record["samplers"].append({"size": len(self.dataset), "indices": indices})
        save()
        return iter(indices)

    def recording_save(obj, f, *args, **kwargs):
        record["saves"].append(os.fspath(f) if isinstance(f, (str, os.PathLike)) else getattr(f, "name", "?"))
        save()
        return plain_save(obj, f, *args, **kwargs)

    from torch.nn.parallel import DistributedDataParallel  # noqa: PLC0415

    plain_forward = DistributedDataParallel.forward

    def recording_forward(self, *inputs, **kwargs):
        first = next((x for x in inputs if isinstance(x, torch.Tensor)), None)
        if self.training and torch.is_grad_enabled() and first is not None and len(record["inputs"]) < 100_000:
            record["inputs"].append(hashlib.sha1(first.detach().cpu().contiguous().numpy().tobytes()).hexdigest()[:16])
            save()
        return plain_forward(self, *inputs, **kwargs)

    DistributedDataParallel.forward = recording_forward
    builtins.print, dist.init_process_group = counting_print, recording_init
    distributed.DistributedSampler.__iter__, torch.save = recording_iter, recording_save
    def wrap_save_image(vision_utils) -> None:
        plain_image = vision_utils.save_image

        def recording_image(tensor, fp, *args, **kwargs):
            record["saves"].append(os.fspath(fp) if isinstance(fp, (str, os.PathLike)) else "?")
            save()
            return plain_image(tensor, fp, *args, **kwargs)

        vision_utils.save_image = recording_image

    # Only a script that imports torchvision pays for it (about a second of CPU in every probed process).
    if "torchvision.utils" in sys.modules:
        wrap_save_image(sys.modules["torchvision.utils"])
    else:
        sys.meta_path.insert(0, _AfterImport("torchvision.utils", wrap_save_image))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Calls `then(module)` once the module `name` has been imported, wherever it is imported from."""

    def __init__(self, name: str, then) -> None:
        self.name, self.then, self.finding = name, then, False

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name or self.finding:
            return None
        self.finding = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.finding = False
        if spec is None or spec.loader is None:
            return spec
        plain_exec = spec.loader.exec_module

        def exec_module(module):
            plain_exec(module)
            sys.meta_path.remove(self)
            self.then(module)

        spec.loader.exec_module = exec_module
        return spec

if _OUT:
    _install()
