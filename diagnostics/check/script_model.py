"""What the static checker knows about one script, built once from Python's `ast`.

Rules (rules.py) only ask questions of a ScriptModel: what a call resolves to through the
imports, whether a line only runs on rank 0, which loops are training loops. Everything here is
conservative: when the structure is unknown the answer is "don't know", and rules stay silent.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from functools import cached_property
from typing import Any, Callable, Iterator, NamedTuple, Protocol, TypeVar, overload

T = TypeVar("T")
FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef
LoopNode = ast.For | ast.AsyncFor | ast.While
GuardNode = ast.If | ast.IfExp | ast.While   # what makes code run on some ranks only

RANK_ENV_VARS = {"RANK", "LOCAL_RANK", "GROUP_RANK", "NODE_RANK", "SLURM_PROCID", "SLURM_LOCALID",
                 "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK"}
RANK_PARTS = {"rank", "rank0", "localrank", "globalrank", "worldrank"}
LEADER_NAME = re.compile(r"^(is_|am_i_|i_am_|on_)?(local_|global_)?(master|main|primary|chief|leader|rank0)"
                         r"(_?(process|proc|rank|node|worker|host|gpu))?$")
RANK_FUNCS = {"get_rank", "get_local_rank", "get_node_local_rank", "get_global_rank"}
RANK_ATTRS = {"process_index", "local_process_index", "global_rank", "local_rank", "node_rank"}
EXIT_CALLS = {"exit", "sys.exit", "os._exit", "quit"}
DEF_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
LOOP_NODES = (ast.For, ast.AsyncFor, ast.While)


def identifier_parts(name: str) -> list[str]:
    snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    return [p for p in snake.split("_") if p]


def is_rank_word(name: str) -> bool:
    """`local_rank`, `ddp_rank`, `is_main_process`, `master_process` — not `nranks`, `master_addr`, `main`."""
    lower = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    if any(part in RANK_PARTS for part in identifier_parts(name)):
        return True
    return lower != "main" and bool(LEADER_NAME.match(lower))


def dotted(node: ast.AST) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


@overload
def last_name(node: ast.Name | ast.Attribute) -> str: ...
@overload
def last_name(node: ast.AST) -> str | None: ...
def last_name(node: ast.AST) -> str | None:
    """The name a callable is spelled with: `f` in `f()`, `save` in `torch.save()`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def has_star_kwargs(call: ast.Call) -> bool:
    return any(kw.arg is None for kw in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args)


def constant(node: ast.AST | None, default: Any = None) -> Any:
    return node.value if isinstance(node, ast.Constant) else default


def walk_local(node: ast.AST) -> Iterator[ast.AST]:
    """ast.walk that does not enter nested functions or classes (their code runs elsewhere)."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        yield child
        if not isinstance(child, DEF_NODES):
            stack.extend(ast.iter_child_nodes(child))


class ProjectView(Protocol):
    """What a model asks of the files around it (project.Project is the one implementation; this
    module does not import it, so model and project do not import each other)."""
    memo: dict[tuple[str, str, int], tuple[bool, list[ast.Call]]]

    def function(self, qualified: str, depth: int = 0) -> tuple[ScriptModel, ast.AST] | None: ...

    def loaded(self) -> list[ScriptModel]: ...

    def load(self, path: Path, source: str | None = None) -> ScriptModel | None: ...

    def imported_files(self, model: ScriptModel) -> list[Path]: ...


class StringLiteral(NamedTuple):
    """A string constant of the script and its text (an ast.Constant's value may be any constant)."""
    node: ast.Constant
    text: str


class ScriptModel:
    """One parsed script plus the facts rules ask about; cheap queries, computed lazily."""

    def __init__(self, tree: ast.Module, source: str, filename: str) -> None:
        self.tree, self.source, self.filename = tree, source, filename
        self.lines = source.splitlines()
        self.parent: dict[ast.AST, ast.AST] = {}
        self.calls: list[ast.Call] = []
        self.functions: dict[str, list[FunctionNode]] = {}
        self.classes: dict[str, list[ast.ClassDef]] = {}
        self.aliases: dict[str, str] = {}
        self.nodes: list[ast.AST] = list(ast.walk(tree))  # one walk; rules filter this list
        self._facts: dict[str, Any] = {}                  # per-script answers rules share (remember)
        self.project: ProjectView | None = None               # set when the files around are known
        for node in self.nodes:
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node
            if isinstance(node, ast.Call):
                self.calls.append(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.ClassDef):
                self.classes.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.aliases[a.asname] = a.name
                    else:
                        head = a.name.split(".")[0]
                        self.aliases[head] = head
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if a.name != "*":
                        self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        self.calls.sort(key=lambda c: (c.lineno, c.col_offset))
        for node in tree.body:  # `DDP = torch.nn.parallel.DistributedDataParallel`
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                full = self.resolve(node.value)
                if full and full != dotted(node.value):
                    self.aliases.setdefault(node.targets[0].id, full)
        self._rank_names = self._find_rank_names()
        self._fn_guard: dict[ast.AST, bool | None] = {}
        self._rank_test_cache: dict[ast.AST, bool] = {}

    def remember(self, key: str, compute: Callable[[], T]) -> T:
        """Answer a question once per script: several rules ask the same one."""
        if key not in self._facts:
            self._facts[key] = compute()
        return self._facts[key]

    # -- names --------------------------------------------------------------------------------
    def resolve(self, node: ast.AST) -> str | None:
        """`dist.barrier` -> `torch.distributed.barrier` through the script's imports."""
        name = dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head in self.aliases:
            return self.aliases[head] + ("." + rest if rest else "")
        return name

    def is_imported(self, node: ast.AST) -> bool:
        name = dotted(node)
        return name is not None and name.split(".")[0] in self.aliases

    def calls_to(self, *targets: str, bare: bool = True) -> list[ast.Call]:
        """Calls of these fully qualified names; with `bare`, an unimported bare name (a star import)
        matches by its last part too."""
        short = {t.rsplit(".", 1)[-1] for t in targets}
        found = []
        for call, full in self._call_names:
            if full in targets or (bare and isinstance(call.func, ast.Name) and not self.is_imported(call.func)
                                   and call.func.id in short):
                found.append(call)
        return found

    def method_calls(self, name: str) -> list[ast.Call]:
        return [c for c in self.calls if isinstance(c.func, ast.Attribute) and c.func.attr == name]

    @cached_property
    def _call_names(self) -> list[tuple[ast.Call, str | None]]:
        return [(call, self.resolve(call.func)) for call in self.calls]

    @cached_property
    def _resolved_names(self) -> set[str]:
        return {full for node in self.nodes if isinstance(node, (ast.Name, ast.Attribute))
                for full in [self.resolve(node)] if full}

    def mentions(self, *names: str) -> bool:
        """Whether any resolved name in the script starts with one of these (module or function)."""
        return any(full == n or full.startswith(n + ".") for full in self._resolved_names for n in names)

    @cached_property
    def _strings(self) -> list[StringLiteral]:
        return [StringLiteral(n, n.value) for n in self.nodes
                if isinstance(n, ast.Constant) and isinstance(n.value, str)]

    def strings(self) -> list[StringLiteral]:
        return self._strings

    @cached_property
    def _references(self) -> dict[str, list[ast.AST]]:
        """Every load of a name or attribute, by its last name: who calls or passes a function."""
        refs: dict[str, list[ast.AST]] = {}
        for node in self.nodes:
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(getattr(node, "ctx", None), ast.Load):
                refs.setdefault(last_name(node), []).append(node)
        return refs

    @cached_property
    def _source_lines(self) -> list[str]:
        """The source split as ast counts lines (\r\n, \r, \n only), each with its end."""
        return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", self.source)

    def segment(self, node: ast.AST) -> str:
        """The source text of a node, as ast.get_source_segment gives it, without splitting the whole
        source again for every node (that made a 1.9 MB script take minutes)."""
        try:
            first, last = node.lineno - 1, node.end_lineno - 1  # type: ignore[attr-defined]
            start, end = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
        except AttributeError:
            return ""
        if first < 0 or last is None or end is None or last >= len(self._source_lines):
            return ""
        lines = self._source_lines
        if first == last:
            return lines[first].encode()[start:end].decode(errors="replace")
        head = lines[first].encode()[start:].decode(errors="replace")
        tail = lines[last].encode()[:end].decode(errors="replace")
        return "".join([head, *lines[first + 1:last], tail])

    def line(self, lineno: int) -> str:
        return self.lines[lineno - 1] if 0 < lineno <= len(self.lines) else ""

    # -- rank guards --------------------------------------------------------------------------
    def _find_rank_names(self) -> set[str]:
        """Names assigned from a rank: `gpu_id = int(os.environ["LOCAL_RANK"])`, `self.master = rank == 0`."""
        names: set[str] = set()
        assigns = [(n, n.value) for n in self.nodes if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value]
        for _ in range(4):
            before = len(names)
            self._taint_parameters(names)
            for node, value in assigns:
                if self._is_rank_source(value, names):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        if isinstance(target, (ast.Name, ast.Attribute)):
                            names.add(last_name(target))
            if len(names) == before:
                break
        return names

    def _taint_parameters(self, names: set[str]) -> None:
        """`Trainer(model, rank)` makes `Trainer.__init__`'s matching parameter a rank; so does
        the first parameter of an `mp.spawn` target."""
        for call in self.calls:
            name = last_name(call.func) or ""
            if name == "spawn" and call.args and isinstance(call.args[0], ast.Name):
                for fn in self.functions.get(call.args[0].id, []):
                    if fn.args.args:
                        names.add(fn.args.args[0].arg)
                continue
            targets = self.functions.get(name, []) + [
                f for cls in self.classes.get(name, []) for f in cls.body
                if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == "__init__"]
            for fn in targets:
                params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
                if params and params[0] in ("self", "cls") and (fn.name == "__init__" or isinstance(call.func, ast.Attribute)):
                    params = params[1:]
                for param, arg in zip(params, call.args):
                    if not isinstance(arg, ast.Starred) and self._is_rank_source(arg, names):
                        names.add(param)
                for kw in call.keywords:
                    if kw.arg and self._is_rank_source(kw.value, names):
                        names.add(kw.arg)

    def _is_rank_source(self, node: ast.AST, names: set[str] | None = None) -> bool:
        names = self._rank_names if names is None else names
        if isinstance(node, (ast.Name, ast.Attribute)):
            name = last_name(node)
            return is_rank_word(name) or name in names or name in RANK_ATTRS
        if isinstance(node, ast.Subscript):
            return constant(node.slice) in RANK_ENV_VARS or self._is_rank_source(node.value, names)
        if isinstance(node, ast.Call):
            func = last_name(node.func)
            if func in ("get", "getenv") and node.args:
                return constant(node.args[0]) in RANK_ENV_VARS
            if func in RANK_FUNCS or (func and is_rank_word(func)):
                return True
            return func in ("int", "bool") and bool(node.args) and self._is_rank_source(node.args[0], names)
        if isinstance(node, ast.BinOp):
            return self._is_rank_source(node.left, names) or self._is_rank_source(node.right, names)
        if isinstance(node, ast.Compare):  # `rank == 0` is a rank flag; `rank != -1` only says "distributed"
            sides = [node.left, *node.comparators]
            ranked = [self._is_rank_source(n, names) for n in sides]
            return any(ranked) and not all(_is_not_distributed_marker(n) for n, r in zip(sides, ranked) if not r)
        if isinstance(node, ast.BoolOp):
            return any(self._is_rank_source(v, names) for v in node.values)
        if isinstance(node, ast.UnaryOp):
            return self._is_rank_source(node.operand, names)
        return False

    def is_rank_test(self, test: ast.AST) -> bool:
        """A condition that picks some ranks but not others (`rank == 0`, `master_process`) — not
        `local_rank != -1`, which only asks whether the job is distributed at all."""
        if test not in self._rank_test_cache:
            self._rank_test_cache[test] = self._rank_test(test)
        return self._rank_test_cache[test]

    def _rank_test(self, test: ast.AST) -> bool:
        if isinstance(test, ast.BoolOp):
            return any(self.is_rank_test(v) for v in test.values)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.is_rank_test(test.operand)
        return self._is_rank_source(test)

    def enclosing(self, node: ast.AST, kinds: tuple[type, ...]) -> ast.AST | None:
        current = self.parent.get(node)
        while current is not None and not isinstance(current, kinds):
            current = self.parent.get(current)
        return current

    def rank_guard(self, node: ast.AST) -> GuardNode | None:
        """The `if` (or early `return`) that makes this node run on some ranks only, within its
        function; None when every rank that reaches the function runs it."""
        child, parent = node, self.parent.get(node)
        while parent is not None:
            if isinstance(parent, (ast.If, ast.IfExp, ast.While)) and child is not parent.test \
                    and self.is_rank_test(parent.test):
                return parent
            for field in ("body", "orelse", "finalbody"):
                block = getattr(parent, field, None)
                if isinstance(block, list) and child in block:
                    for before in block[:block.index(child)]:
                        if isinstance(before, ast.If) and self.is_rank_test(before.test) and _leaves(before.body):
                            return before
            if isinstance(parent, DEF_NODES):
                return None
            child, parent = parent, self.parent.get(parent)
        return None

    def runs_on_all_ranks(self, node: ast.AST) -> bool | None:
        """True: evidence that every rank runs this line; False: only some do; None: unknown (a
        function never called in this file, or only through paths we cannot follow)."""
        if self.rank_guard(node) is not None:
            return False
        fn = self.enclosing(node, DEF_NODES)
        if fn is None:
            return True
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):  # a lambda or a class body
            return None
        return self._function_on_all_ranks(fn)

    def _function_on_all_ranks(self, fn: FunctionNode) -> bool | None:
        if fn in self._fn_guard:
            return self._fn_guard[fn]
        self._fn_guard[fn] = None  # a cycle answers "unknown"
        answers: list[bool | None] = []
        name = fn.name
        if name == "__init__":  # a constructor runs where its class is called
            owner = self.parent.get(fn)
            name = owner.name if isinstance(owner, ast.ClassDef) else name
        for node in self._references.get(name, []):
            parent = self.parent.get(node)
            if isinstance(parent, ast.Call) and parent.func is node:
                answers.append(self.runs_on_all_ranks(parent))
            elif isinstance(parent, (ast.Call, ast.keyword)) and self._is_process_target(parent, node):
                answers.append(True)
            elif isinstance(node, ast.Name) and self._callback_of(parent, node) is not None:
                answers.append(self.runs_on_all_ranks(self._callback_of(parent, node)))  # type: ignore[arg-type]
            else:
                answers.append(None)
        result = True if True in answers else (False if answers and all(a is False for a in answers) else None)
        self._fn_guard[fn] = result
        return result

    def _callback_of(self, parent: ast.AST | None, passed: ast.AST) -> ast.Call | None:
        """`train(…, on_epoch_end=report)`: the call of a function of this file that gets `report` as an
        argument; the callback runs where that call runs (a library's hook may run elsewhere: unknown)."""
        call = self.parent.get(parent) if isinstance(parent, ast.keyword) else parent
        if not isinstance(call, ast.Call) or passed is call.func or last_name(call.func) not in self.functions:
            return None
        return call

    def _is_process_target(self, node: ast.AST, passed: ast.AST | None = None) -> bool:
        call = self.parent.get(node) if isinstance(node, ast.keyword) else node
        if not isinstance(call, ast.Call):
            return False
        if last_name(call.func) in ("spawn", "start_processes", "Process"):
            return True
        return passed is not None and self._hands_to_spawn(call, passed)

    def _hands_to_spawn(self, call: ast.Call, passed: ast.AST) -> bool:
        """`launch(worker, 2)` where `def launch(fn, n): mp.spawn(fn, …)`: worker is a process target."""
        if passed not in call.args:
            return False
        index = call.args.index(passed)
        for fn in self.functions.get(last_name(call.func) or "", []):
            params = [a.arg for a in fn.args.args]
            if index < len(params) and any(
                    isinstance(n, ast.Call) and last_name(n.func) in ("spawn", "start_processes", "Process")
                    and any(isinstance(a, ast.Name) and a.id == params[index]
                            for a in n.args[:1] + [k.value for k in n.keywords if k.arg in ("fn", "target")])
                    for n in ast.walk(fn)):
                return True
        return False

    # -- loops --------------------------------------------------------------------------------
    @cached_property
    def training_loops(self) -> list[LoopNode]:
        """Innermost loops whose own body calls `.backward()`: one pass of them is one step."""
        loops: list[LoopNode] = []
        for node in self.nodes:
            if isinstance(node, LOOP_NODES) and _calls_backward(node):
                inner = [n for n in walk_local(node) if isinstance(n, LOOP_NODES) and _calls_backward(n)]
                if not inner:
                    loops.append(node)
        return sorted(loops, key=lambda n: n.lineno)

    def unconditional_in(self, node: ast.AST, loop: ast.AST) -> bool:
        """Whether `node` runs on every pass of `loop` (no `if`/`try` between them)."""
        current = self.parent.get(node)
        while current is not None and current is not loop:
            if isinstance(current, (ast.If, ast.IfExp, ast.Try, ast.comprehension, *DEF_NODES)):
                return False
            current = self.parent.get(current)
        return current is loop


def _calls_backward(loop: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and last_name(n.func) == "backward" for n in walk_local(loop))


def _leaves(body: list[ast.stmt]) -> bool:
    """A block that ends by leaving: return, continue, break, raise, sys.exit()."""
    last = body[-1] if body else None
    if isinstance(last, (ast.Return, ast.Continue, ast.Break, ast.Raise)):
        return True
    return isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) and dotted(last.value.func) in EXIT_CALLS


def _is_not_distributed_marker(node: ast.AST) -> bool:
    """`-1` and `None` in `local_rank != -1` mean "not launched distributed", not "some ranks"."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return constant(node.operand) == 1
    if isinstance(node, ast.Constant):
        return node.value is None
    return False
