"""The compile boundary: torch.compile on the trainer's model, what it cost, and what a failure says.

torch.compile is lazy: the model is traced and built on its first call, so a failure (a missing
C compiler, an op inductor cannot lower, a graph that cannot be captured) surfaces in the first
step, not here. The loop watches those first steps (`CompileWatch`) and, on such a failure,
rebuilds the step without compiling and says why, instead of ending the run.
"""
from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import nn

from mgtutor.training.worker.trainer.compile_choice import CompilePlan

# What torch.compile compiles with; tests put a backend here that fails, to see the fallback.
BACKEND: str | Callable[..., Any] = "inductor"
# The tests' stand-in for a compiler that crashes its process (as inductor has, with SIGSEGV in a
# native thread): set, every rank dies of SIGSEGV inside its first compile.
FAKE_CRASH_ENV = "MGTUTOR_FAKE_COMPILE_CRASH"


def _crashing_backend(gm: Any, example_inputs: Any, **_kwargs: Any) -> Any:
    os.kill(os.getpid(), signal.SIGSEGV)
    return gm  # not reached


_COMPILER_MODULES = ("torch._dynamo", "torch._inductor", "torch._functorch", "triton")


def compile_module(model: nn.Module, plan: CompilePlan) -> nn.Module:
    mode = None if plan.mode in (None, "default") else plan.mode
    # for a module torch.compile returns an OptimizedModule (an nn.Module); its stub says only Callable
    backend = _crashing_backend if os.environ.get(FAKE_CRASH_ENV) else BACKEND
    return cast(nn.Module, torch.compile(model, mode=mode, backend=backend))


def is_compile_failure(exc: BaseException, capturing: bool) -> bool:
    """An error raised by the compiler stack (or, while capturing the compiled step, by the capture),
    not by training itself: an OOM or a rank's crash is the run's own error and must stay one."""
    if isinstance(exc, (torch.OutOfMemoryError, KeyboardInterrupt, SystemExit)):
        return False
    seen: BaseException | None = exc
    while seen is not None:
        if type(seen).__module__.startswith(_COMPILER_MODULES):
            return True
        seen = seen.__cause__ or seen.__context__
    return capturing and isinstance(exc, RuntimeError) and "captur" in str(exc).lower()


def one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:limit]}{'…' if len(text) > limit else ''}"


def _cache_counts() -> dict[str, int]:
    from torch._dynamo.utils import counters
    return {"fx_hit": counters["inductor"]["fxgraph_cache_hit"],
            "fx_miss": counters["inductor"]["fxgraph_cache_miss"],
            "aot_hit": counters["aot_autograd"]["autograd_cache_hit"],
            "aot_miss": counters["aot_autograd"]["autograd_cache_miss"]}


@dataclass
class CompileWatch:
    """Times the compiling steps and counts what inductor's caches gave; `fell_back` holds a failure's reason."""
    plan: CompilePlan
    began: float = field(default_factory=time.perf_counter)
    before: dict[str, int] = field(default_factory=_cache_counts)
    seconds: float | None = None
    fell_back: str | None = None
    done: bool = False  # the compiled step has run once (graphed: and been captured), or has failed

    def compiled(self) -> None:
        self.seconds = time.perf_counter() - self.began

    def cache_use(self) -> dict[str, int]:
        now = _cache_counts()
        return {key: now[key] - self.before[key] for key in now}

    def summary(self) -> str:
        """The line rank 0 prints once the compiled step has run (or failed)."""
        if self.fell_back:
            return f"compile: {self.plan.label} failed, so the step runs without compiling: {self.fell_back}"
        use = self.cache_use()
        graphs = use["fx_hit"] + use["fx_miss"]
        cache = (f"{use['fx_hit']} of {graphs} inductor graphs from the cache" if graphs
                 else "no inductor graph built")
        warm = "warm cache" if graphs and use["fx_miss"] == 0 else "cold cache" if graphs else "no cache"
        return f"compile: {self.plan.label} compiled in {self.seconds or 0:.1f} s ({warm}: {cache})"

    def as_json(self) -> dict[str, Any]:
        return {"compile": self.plan.label, "compile_s": None if self.seconds is None else round(self.seconds, 2),
                "compile_fallback": self.fell_back, "compile_cache": self.cache_use()}
