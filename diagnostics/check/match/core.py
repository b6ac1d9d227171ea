"""The evidence each check rule looks for: one small function per rule, referenced from the table in
rules.py. Each yields (node, message-or-None) for every place the rule fires, and yields
nothing when the structure is unknown (a guess would be worse than silence)."""
from __future__ import annotations

import ast
import re
from typing import Callable, Iterator, Sequence, TypeVar

from mgtutor.diagnostics.check import call_facts
from mgtutor.training.foundation.i18n import _
from mgtutor.diagnostics.check.script_model import (
    DEF_NODES, ScriptModel, constant, dotted, has_star_kwargs, identifier_parts, keyword, last_name, walk_local,
)

# (node, message or None for the rule's title[, caveat]): a caveat says why the finding may not apply;
# the finding is then advice whatever the rule's severity, and its confidence is "low".
Hits = Iterator[tuple]

DDP = ("torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel")
FSDP = ("torch.distributed.fsdp.FullyShardedDataParallel", "torch.distributed.fsdp.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard")
INIT = ("torch.distributed.init_process_group",)
DATALOADER = ("torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader")
DIST_SAMPLER = ("torch.utils.data.DistributedSampler", "torch.utils.data.distributed.DistributedSampler")
DATAPARALLEL = ("torch.nn.DataParallel", "torch.nn.parallel.DataParallel",
                "torch.nn.parallel.data_parallel.DataParallel")
SPAWN = ("torch.multiprocessing.spawn", "torch.multiprocessing.start_processes")
COLLECTIVES = {"barrier", "monitored_barrier", "all_reduce", "all_gather", "all_gather_into_tensor",
               "all_gather_object", "broadcast", "broadcast_object_list", "reduce", "reduce_scatter",
               "reduce_scatter_tensor", "gather", "gather_object", "scatter", "scatter_object_list",
               "all_to_all", "all_to_all_single", "new_group"}
DIST_WORDS = {"ddp", "distributed", "dist", "world", "rank", "initialized", "multiprocessing", "nproc", "gpus"}
LOCAL_RANK_VARS = {"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID"}
CUDA_INDEX = re.compile(r"^cuda:\d+$")
T = TypeVar("T")


# -- shared facts ------------------------------------------------------------------------------
def fact(func: Callable[[ScriptModel], T]) -> Callable[[ScriptModel], T]:
    """Answer once per script: several rules ask the same question."""
    def cached(m: ScriptModel) -> T:
        return m.remember(func.__name__, lambda: func(m))
    cached.__name__, cached.__doc__ = func.__name__, func.__doc__
    return cached


@fact
def manual_ddp(m: ScriptModel) -> bool:
    """The script sets up torch.distributed itself (not through Accelerate or Lightning)."""
    return bool(m.calls_to(*INIT) or m.calls_to(*DDP) or m.calls_to(*FSDP)) and not uses_accelerate(m)


@fact
def uses_accelerate(m: ScriptModel) -> bool:
    return m.mentions("accelerate")


@fact
def distributed(m: ScriptModel) -> bool:
    return manual_ddp(m) or uses_accelerate(m) or bool(m.calls_to(*SPAWN, bare=False))


@fact
def uses_cuda(m: ScriptModel) -> bool:
    return bool(m.method_calls("cuda")) or any(re.match(r"^cuda(:\d+)?$", s.text) for s in m.strings())


@fact
def sets_visible_devices(m: ScriptModel) -> bool:
    """A script that sets CUDA_VISIBLE_DEVICES per rank may rightly use cuda:0; we cannot tell."""
    return any(s.text == "CUDA_VISIBLE_DEVICES" for s in m.strings())


@fact
def binds_device(m: ScriptModel) -> bool:
    if m.method_calls("set_device") or m.calls_to("torch.cuda.device", bare=False):
        return True
    return any(keyword(c, "device_ids") is not None or len(c.args) > 1 for c in m.calls_to(*DDP)) or \
        any(keyword(c, "device_id") is not None for c in m.calls_to(*INIT))


def mentions_distribution(m: ScriptModel, test: ast.AST) -> bool:
    for node in ast.walk(test):
        name = last_name(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if name and (set(identifier_parts(name)) & DIST_WORDS or m.is_rank_test(node)):
            return True
    return False


def in_distribution_branch(m: ScriptModel, node: ast.AST) -> bool:
    """Inside `if ddp: … else: …` the other branch is the single-process path; leave it alone."""
    current = m.parent.get(node)
    while current is not None and not isinstance(current, DEF_NODES):
        if isinstance(current, (ast.If, ast.IfExp)) and mentions_distribution(m, current.test):
            return True
        current = m.parent.get(current)
    return False


def in_single_process_branch(m: ScriptModel, node: ast.AST) -> bool:
    """The `else` of `if ddp:` (or the body of `if not ddp:`): the path taken when not distributed."""
    child, current = node, m.parent.get(node)
    while current is not None and not isinstance(current, DEF_NODES):
        if isinstance(current, ast.If) and mentions_distribution(m, current.test) and not m.is_rank_test(current.test):
            negated = isinstance(current.test, ast.UnaryOp) and isinstance(current.test.op, ast.Not)
            if child in (current.body if negated else current.orelse):
                return True
        child, current = current, m.parent.get(current)
    return False


def mentions_rank(m: ScriptModel, nodes: Sequence[ast.AST]) -> bool:
    return any(m.is_rank_test(n) for node in nodes for n in ast.walk(node)
               if isinstance(n, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)))


def sampler_arg(call: ast.Call) -> ast.expr | None:
    value = keyword(call, "sampler") or keyword(call, "batch_sampler")
    if value is None and len(call.args) >= 4:
        value = call.args[3]
    return None if constant(value, "x") is None else value


# -- rules --------------------------------------------------------------------------------------
def no_distributed_sampler(m: ScriptModel) -> Hits:
    if not manual_ddp(m) or any("IterableDataset" in (dotted(b) or "") for c in m.nodes
                                if isinstance(c, ast.ClassDef) for b in c.bases):
        return
    every = m.calls_to(*DATALOADER)
    loaders = [c for c in every if not has_star_kwargs(c) or _kwargs_hold_no_sampler(m, c)]
    if any(sampler_arg(c) is not None for c in every):
        return  # one loader is sharded; others are likely evaluation loaders: unknown
    loaders = [c for c in loaders if not _own_shard(m, c)]
    created = m.calls_to(*DIST_SAMPLER)
    for call in loaders:
        if created:
            yield call, _("a DistributedSampler is created (line {line}) but this DataLoader does not get it: "
                          "every rank still reads the whole dataset").format(line=created[0].lineno)
        else:
            yield call, None


def _kwargs_hold_no_sampler(m: ScriptModel, loader: ast.Call) -> bool:
    """`DataLoader(ds, **train_kwargs)` where every dict given is a literal this file builds, and none
    holds a sampler (pytorch/examples' MNIST)."""
    if any(isinstance(a, ast.Starred) for a in loader.args):
        return False
    for kw in loader.keywords:
        if kw.arg is None:
            keys = call_facts.dict_keys(m, kw.value)
            if keys is None or keys & {"sampler", "batch_sampler"}:
                return False
    return True


def _own_shard(m: ScriptModel, loader: ast.Call) -> bool:
    """The loader's dataset is this rank's part already: built from the rank (`partition.use(rank)`,
    `Subset(ds, idx[rank::world])`, `ds.shard(num_shards=world, index=rank)`), here or where its name was
    last assigned (two steps back at most)."""
    dataset: ast.AST | None = keyword(loader, "dataset") or (loader.args[0] if loader.args else None)
    for _step in range(3):
        if dataset is None:
            return False
        if mentions_rank(m, [dataset]):
            return True
        if not isinstance(dataset, ast.Name):
            return False
        dataset = call_facts.assigned_before(m, dataset)
    return False


def _loops_over(m: ScriptModel, name: str, scope: ast.AST) -> list[ast.AST] | None:
    """The loops whose iterable is `name` (or enumerate/tqdm/iter of it) in `scope`; None when the name is
    used any other way there (passed to a function, stored): then who iterates it is unknown."""
    loops: list[ast.AST] = []
    for node in ast.walk(scope):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load):
            parent = m.parent.get(node)
            while isinstance(parent, ast.Call) and last_name(parent.func) in ("enumerate", "tqdm", "iter") \
                    and parent.args and parent.args[0] in (node, *[a for a in parent.args[:1]]):
                node, parent = parent, m.parent.get(parent)
            if isinstance(parent, (ast.For, ast.AsyncFor)) and parent.iter is node:
                loops.append(parent)
            else:
                return None
    return loops


def _single_pass(m: ScriptModel, sampler: ast.Call) -> bool:
    """The data this sampler feeds is read exactly once: its loader's only use is one loop, at the top
    level of the module, inside no other loop. Then there is no second epoch for set_epoch to reshuffle."""
    stmt = m.parent.get(sampler)
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return False
    name = stmt.targets[0].id
    uses = [n for n in m.nodes if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)]
    loaders = [c for c in m.calls_to(*DATALOADER) if isinstance(sampler_arg(c), ast.Name)
               and sampler_arg(c).id == name]  # type: ignore[union-attr]
    if len(loaders) != 1 or len(uses) != 1:
        return False
    target = m.parent.get(loaders[0])
    if not (isinstance(target, ast.Assign) and len(target.targets) == 1 and isinstance(target.targets[0], ast.Name)):
        return False
    loops = _loops_over(m, target.targets[0].id, m.tree)
    if not loops or len(loops) != 1:
        return False
    return m.enclosing(loops[0], (*DEF_NODES, ast.For, ast.AsyncFor, ast.While)) is None


def no_ddp_wrap(m: ScriptModel) -> Hits:
    """init_process_group and a training step, but nothing that averages gradients across ranks."""
    inits = m.calls_to(*INIT)
    if not inits or uses_accelerate(m) or not m.method_calls("backward") or not m.method_calls("step"):
        return
    syncs = ("DistributedDataParallel", "DDP", "FullyShardedDataParallel", "FSDP", "fully_shard",
             "all_reduce", "reduce_scatter", "all_gather", "all_gather_into_tensor", "deepspeed", "horovod")
    names = {last_name(n) for n in m.nodes if isinstance(n, (ast.Name, ast.Attribute))}
    names |= {a.split(".")[-1] for a in m.aliases.values()} | {a.split(".")[0] for a in m.aliases.values()}
    # an optimizer that averages for you: horovod's DistributedOptimizer, cherry.optim.Distributed
    wrappers = {n for n in names if n and n.startswith("Distributed") and n not in ("DistributedSampler",)}
    if not names & set(syncs) and not wrappers:
        yield inits[0], None


def sampler_with_shuffle(m: ScriptModel) -> Hits:
    for call in m.calls_to(*DATALOADER):
        if sampler_arg(call) is not None and constant(keyword(call, "shuffle")) is True:
            yield call, None


def sampler_without_set_epoch(m: ScriptModel) -> Hits:
    """set_epoch may be called by a helper (an engine's train_one_epoch) or, for a loader factory, by
    the script that asked for the loader: both are looked for in the project files read."""
    if any(not call_facts.through_a_call(c) for c in m.method_calls("set_epoch")) or call_facts.project_calls(m, "set_epoch"):
        return
    for call in m.calls_to(*DIST_SAMPLER):
        shuffle = keyword(call, "shuffle") if keyword(call, "shuffle") is not None else \
            (call.args[3] if len(call.args) > 3 else None)
        if constant(shuffle, True) is False or has_star_kwargs(call) or _single_pass(m, call):
            continue
        fn = m.enclosing(call, DEF_NODES)
        if fn is not None and any(isinstance(n, ast.Return) and n.value is not None for n in walk_local(fn)) \
                and not call_facts.called_in_files_read(m, getattr(fn, "name", "")):
            yield call, None, _("{function}() hands what it builds to its caller, which may call set_epoch; no "
                                "caller that does was found in the files read").format(
                                    function=getattr(fn, "name", None) or _("this function"))
        else:
            yield call, None


def no_set_device(m: ScriptModel) -> Hits:
    if not manual_ddp(m) or binds_device(m) or sets_visible_devices(m) or not uses_cuda(m):
        return
    inits = m.calls_to(*INIT)
    nccl = any(s.text.lower() == "nccl" for s in m.strings()) or m.mentions("torch.distributed.Backend.NCCL") \
        or any(not c.args and keyword(c, "backend") is None and not has_star_kwargs(c) for c in inits)
    if nccl:
        yield (inits or m.calls_to(*DDP, *FSDP))[0], None


def hardcoded_cuda0(m: ScriptModel) -> Hits:
    if not manual_ddp(m) or sets_visible_devices(m):
        return
    for node in _fixed_device_uses(m):
        if not in_distribution_branch(m, node) and m.runs_on_all_ranks(node) is not False:
            yield node, None


def _fixed_device_uses(m: ScriptModel) -> Iterator[ast.AST]:
    ddp_calls = {id(c) for c in m.calls_to(*DDP)}
    for s in m.strings():
        if CUDA_INDEX.match(s.text) and _is_device_context(m, s.node):
            yield s.node
    for call in m.calls:
        name = last_name(call.func)
        if name in ("cuda", "set_device", "device", "to") and call.args and \
                any(type(a) is ast.Constant and type(a.value) is int for a in call.args[-1:]):
            if name != "device" or m.resolve(call.func) in ("torch.device", "torch.cuda.device"):
                yield call
        ids = keyword(call, "device_ids") if id(call) in ddp_calls else None
        if isinstance(ids, (ast.List, ast.Tuple)) and ids.elts and all(type(constant(e)) is int for e in ids.elts):
            yield ids


def _is_device_context(m: ScriptModel, node: ast.AST) -> bool:
    parent = m.parent.get(node)
    if isinstance(parent, ast.keyword):
        return parent.arg in ("device", "map_location")
    if isinstance(parent, ast.Call):
        return last_name(parent.func) in ("to", "device", "set_device")
    if isinstance(parent, ast.Assign):
        return any("device" in (last_name(t) or "") for t in parent.targets)
    return False


def dataparallel(m: ScriptModel) -> Hits:
    for call in m.calls_to(*DATAPARALLEL):
        yield call, None


def distributed_launch(m: ScriptModel) -> Hits:
    for node in m.nodes:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [f"{node.module}.{a.name}" for a in node.names]
            if any(n.startswith("torch.distributed.launch") for n in names):
                yield node, None
                return
    for s in m.strings():
        # a string statement inside the code is a note about something else; the module's own
        # docstring is how this script says it is launched
        parent = m.parent.get(s.node)
        note = isinstance(parent, ast.Expr) and not (m.tree.body and m.tree.body[0] is parent) or \
            isinstance(parent, ast.keyword) and parent.arg == "help"  # `--local_rank` kept for the old launcher
        if "torch.distributed.launch" in s.text and not note:
            yield s.node, None
            return


def local_rank_argument(m: ScriptModel) -> Hits:
    """Silent when this file, or a helper it calls (here or in a project module), reads the rank
    from the environment; advice when the setup happens in code that was not read."""
    arguments = [c for c in m.method_calls("add_argument")
                 if any(constant(a) in ("--local_rank", "--local-rank") for a in c.args)]
    if not arguments or any(s.text in LOCAL_RANK_VARS for s in m.strings()) or call_facts.helper_reads_rank_env(m) \
            or _overwritten_from_env(m, arguments):
        return
    unread = call_facts.unread_setup_calls(m)
    for call in arguments:
        if unread:
            yield call, None, _("the distributed setup happens in {call}, which was not read; helpers like it often "
                                "read LOCAL_RANK from the environment, and then the argument is only a "
                                "fallback").format(call=call_facts.describe_call(m, unread[0]))
        else:
            yield call, None


def _overwritten_from_env(m: ScriptModel, arguments: list[ast.Call]) -> bool:
    """`args.local_rank = int(os.environ["LOCAL_RANK"])` here or in a project module this file imports (a
    method of a config class, a star-imported helper), or `args.local_rank = get_local_rank()` where that
    function reads LOCAL_RANK: the argument is only the old launcher's fallback."""
    dests = {(constant(keyword(c, "dest")) or next(str(constant(a)) for a in c.args if str(constant(a)).startswith("--"))
              ).lstrip("-").replace("-", "_") for c in arguments}
    models = [m]
    if m.project is not None:
        queue = [m]
        while queue and len(models) < 50:
            for path in m.project.imported_files(queue.pop()):
                loaded = m.project.load(path)
                if loaded is not None and loaded not in models:
                    models.append(loaded)
                    queue.append(loaded)
    readers = {fn.name for model in models for fns in model.functions.values() for fn in fns
               if any(constant(n) in LOCAL_RANK_VARS for n in ast.walk(fn))}

    def from_env(value: ast.AST) -> bool:
        return any(constant(n) in LOCAL_RANK_VARS or isinstance(n, ast.Call) and last_name(n.func) in readers
                   for n in ast.walk(value))
    for model in models:
        for node in model.nodes:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr in dests
                                                    for t in node.targets) and from_env(node.value):
                return True
            if isinstance(node, ast.Call) and last_name(node.func) == "setattr" and len(node.args) == 3 \
                    and constant(node.args[1]) in dests and from_env(node.args[2]):
                return True
    return False


def spawn_master_port(m: ScriptModel) -> Hits:
    if not m.calls_to(*SPAWN, bare=False):
        return
    for s in m.strings():
        parent = m.parent.get(s.node)
        if s.text == "MASTER_PORT" and (isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store)
                                         or isinstance(parent, ast.Call) and last_name(parent.func) == "setdefault"):
            yield s.node, None
            return


def nccl_without_fallback(m: ScriptModel) -> Hits:
    for call in m.calls_to(*INIT):
        backend = keyword(call, "backend") or (call.args[0] if call.args else None)
        backend = parameter_default(m, backend) or backend
        if isinstance(constant(backend), str) and constant(backend).lower() == "nccl" and not _under_cuda_test(m, call):
            yield call, None


def parameter_default(m: ScriptModel, name: ast.AST | None) -> ast.expr | None:
    """`def setup(rank, backend="nccl"): init_process_group(backend=backend)`: the parameter's default, when
    no call of the function in this file passes that parameter (then the default is what every run uses)."""
    fn = m.enclosing(name, DEF_NODES) if isinstance(name, ast.Name) else None
    if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    params = fn.args.posonlyargs + fn.args.args
    defaults = dict(zip([a.arg for a in params][len(params) - len(fn.args.defaults):], fn.args.defaults))
    default = defaults.get(name.id)  # type: ignore[union-attr]
    if default is None or any(isinstance(n, ast.Name) and n.id == name.id and isinstance(n.ctx, ast.Store)  # type: ignore[union-attr]
                              for n in walk_local(fn)):
        return None
    index = [a.arg for a in params].index(name.id)  # type: ignore[union-attr]
    for call in m.calls:
        if last_name(call.func) == fn.name and (len(call.args) > index or keyword(call, name.id) is not None  # type: ignore[union-attr]
                                                 or has_star_kwargs(call)):
            return None
    return default


def _under_cuda_test(m: ScriptModel, node: ast.AST) -> bool:
    current = m.parent.get(node)
    while current is not None:
        if isinstance(current, (ast.If, ast.IfExp, ast.While)) and any(
                "cuda" in (dotted(n) or "").lower() or "is_available" in (dotted(n) or "") or constant(n) == "cuda"
                for n in ast.walk(current.test)):
            return True
        current = m.parent.get(current)
    return False


def with_timeout(node: ast.AST, m: ScriptModel) -> tuple[str, str] | None:
    """The user's own init_process_group call, and the same call with a timeout added."""
    call = m.segment(node) if isinstance(node, ast.Call) else None
    if not call or not call.endswith(")") or "\n" in call:
        return None
    inside = call[call.index("(") + 1:-1].rstrip()
    sep = "" if not inside else (" " if inside.endswith(",") else ", ")
    return call, f"{call[:-1].rstrip()}{sep}timeout=datetime.timedelta(minutes=5))"


def init_without_timeout(m: ScriptModel) -> Hits:
    for call in m.calls_to(*INIT):
        if keyword(call, "timeout") is None and not has_star_kwargs(call):
            yield call, None
