"""The collectives the all-reduce worker times, and its data fill/check (imports torch lazily:
only worker processes call these).

Out-of-place: torch's all_reduce works in place only, so to time what nccl-tests times
(sendbuff ≠ recvbuff) ncclAllReduce is called through ctypes with the communicator torch already
built — the same libnccl torch loaded, found in /proc/self/maps, never another copy. If any of
that is missing, or a first call gives a wrong sum, out-of-place is copy + in-place all_reduce.
"""
from __future__ import annotations

import ctypes
from typing import Any, Callable

NCCL_TYPES = {"int8": 0, "uint8": 1, "int32": 2, "int64": 4, "half": 6, "float": 7, "double": 8, "bfloat16": 9}
NCCL_SUM = 0
CHUNK = 1 << 26  # elements per step when filling/checking huge buffers


def fill(torch: Any, buf: Any, count: int, rank: int) -> None:
    """Element i of rank r = (i mod 13) + r + 1: every rank and position differs, sums stay small."""
    for lo in range(0, count, CHUNK):
        hi = min(count, lo + CHUNK)
        idx = torch.arange(lo, hi, device=buf.device, dtype=torch.int64) % 13
        buf[lo:hi].copy_((idx + rank + 1).to(buf.dtype))


def count_wrong(torch: Any, buf: Any, count: int, world: int) -> Any:
    """Elements that differ from the exact sum over ranks (half/bfloat16: within 1%)."""
    wrong = torch.zeros((), dtype=torch.int64, device=buf.device)
    low_precision = buf.dtype in (torch.float16, torch.bfloat16)
    for lo in range(0, count, CHUNK):
        hi = min(count, lo + CHUNK)
        idx = torch.arange(lo, hi, device=buf.device, dtype=torch.int64) % 13
        expected = (idx * world + world * (world + 1) // 2).to(buf.dtype)
        got = buf[lo:hi]
        if low_precision:
            bad = (got.double() - expected.double()).abs() > 0.01 * expected.double().abs()
        else:
            bad = got != expected
        wrong += bad.sum()
    return wrong


def _loaded_nccl() -> str | None:
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(" ")[-1]
                if "libnccl.so" in path.rsplit("/", 1)[-1]:
                    return path
    except OSError:
        pass
    return None


class NcclDirect:
    """ncclAllReduce(send, recv, …) on torch's communicator and the current stream."""

    def __init__(self, torch: Any, dist: Any, device: Any, dtype_name: str) -> None:
        path = _loaded_nccl()
        if path is None:
            raise RuntimeError("torch's libnccl is not loaded as a shared library")
        backend = dist.group.WORLD._get_backend(device)
        self.comm = ctypes.c_void_p(int(backend._comm_ptr()))
        self.lib = ctypes.CDLL(path)
        self.lib.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                           ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        self.lib.ncclAllReduce.restype = ctypes.c_int
        self.torch, self.nccl_type = torch, NCCL_TYPES[dtype_name]

    def all_reduce(self, send: Any, recv: Any, count: int) -> None:
        stream = ctypes.c_void_p(self.torch.cuda.current_stream().cuda_stream)
        status = self.lib.ncclAllReduce(ctypes.c_void_p(send.data_ptr()), ctypes.c_void_p(recv.data_ptr()),
                                        count, self.nccl_type, NCCL_SUM, self.comm, stream)
        if status != 0:
            raise RuntimeError(f"ncclAllReduce returned {status}")


class Collectives:
    def __init__(self, torch: Any, dist: Any, device: Any, dtype: Any, dtype_name: str, oop: str) -> None:
        self.torch, self.dist, self.device, self.dtype = torch, dist, device, dtype
        self.world = dist.get_world_size()
        self.rank = dist.get_rank()
        self.direct: NcclDirect | None = None
        self.oop_method = "copy+allreduce"
        if device.type == "cuda" and oop in ("auto", "nccl"):
            self._try_direct(dtype_name, required=oop == "nccl")

    def _try_direct(self, dtype_name: str, required: bool) -> None:
        torch = self.torch
        ok, reason, direct = 1, "a first call gave a wrong sum", None
        try:
            direct = NcclDirect(torch, self.dist, self.device, dtype_name)
        except Exception as exc:  # no _comm_ptr in this torch, NCCL linked statically, …
            ok, reason = 0, f"{type(exc).__name__}: {exc}"
        ok = self._agree(ok)  # every rank takes the same path, or NCCL calls would not pair up
        if ok:
            assert direct is not None  # _agree is 0 when any rank failed to build one
            send, recv = self.buffers(1024)
            fill(torch, send, 1024, self.rank)
            direct.all_reduce(send, recv, 1024)
            ok = self._agree(int(count_wrong(torch, recv, 1024, self.world).item() == 0))
        if ok:
            self.direct, self.oop_method = direct, "nccl"
        elif required:
            raise RuntimeError(f"--oop nccl: calling NCCL directly is not possible here ({reason})")

    def _agree(self, flag: int) -> int:
        t = self.torch.tensor([flag], device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MIN)
        return int(t.item())

    def buffers(self, count: int) -> tuple[Any, Any]:
        make = lambda: self.torch.empty(count, dtype=self.dtype, device=self.device)  # noqa: E731
        return make(), make()

    def inplace_op(self, recv: Any, count: int) -> Callable[[], None]:
        view, all_reduce = recv[:count], self.dist.all_reduce
        return lambda: all_reduce(view)

    def outofplace_op(self, send: Any, recv: Any, count: int) -> Callable[[], None]:
        src, dst = send[:count], recv[:count]
        if self.direct is not None:
            direct = self.direct
            return lambda: direct.all_reduce(src, dst, count)
        all_reduce = self.dist.all_reduce

        def copy_then_reduce() -> None:
            dst.copy_(src)
            all_reduce(dst)
        return copy_then_reduce

    def graph_usable(self) -> bool:
        """Try capturing one small all-reduce of each kind; all ranks agree on the answer."""
        torch = self.torch
        send, recv = self.buffers(256)
        fill(torch, send, 256, self.rank)
        ok = 1
        try:
            for op in (self.inplace_op(recv, 256), self.outofplace_op(send, recv, 256)):
                op()
                torch.cuda.synchronize()
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    op()
                graph.replay()
                torch.cuda.synchronize()
                del graph
        except Exception:
            ok = 0
        return bool(self._agree(ok))

    def max_across_ranks(self, value: float) -> float:
        t = self.torch.tensor([value], dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return float(t.item())

    def sum_across_ranks(self, value: Any) -> int:
        t = self.torch.as_tensor(value, dtype=self.torch.int64, device=self.device).reshape(1).clone()
        self.dist.all_reduce(t)
        return int(t.item())
