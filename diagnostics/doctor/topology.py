"""How the GPUs are connected, from NVML alone (no torch), like `nvidia-smi topo -m`.

NVML's common-ancestor query describes the PCIe path only (two NVLinked GPUs in a VM still read
"host bridge"), so NVLink comes from the P2P status with the NVLink capability index and from
the per-link state. The per-link remote PCI info is not trusted: some VMs answer FFFFFFFF for it.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from mgtutor.training.runs import nvml
from mgtutor.training.foundation.i18n import N_
from mgtutor.diagnostics.meters import gpu_handles, nvlink_link_states

# nvmlGpuTopologyLevel_t -> (nvidia-smi label, words)
PCIE_LEVELS = {
    0: ("X", N_("same board")),
    10: ("PIX", N_("one PCIe switch")),
    20: ("PXB", N_("several PCIe switches")),
    30: ("PHB", N_("PCIe host bridge")),
    40: ("NODE", N_("across host bridges in one NUMA node")),
    50: ("SYS", N_("across CPU sockets (SMP interconnect)")),
}
P2P_CAPS_INDEX_READ = 0  # pynvml spells this constant as a tuple by mistake
P2P_CAPS_INDEX_NVLINK = 2
P2P_STATUS_OK = 0
# Per-link bandwidth, GB/s each direction, by NVML's NVLink version enum.
NVLINK_GBPS_PER_LINK = {1: 20.0, 2: 25.0, 3: 25.0, 4: 25.0, 5: 25.0, 6: 25.0, 7: 50.0, 8: 100.0}
NVLINK_GENERATION = {1: "1", 2: "2", 3: "2.2", 4: "3", 5: "3.1", 6: "4", 7: "5", 8: "6"}
# PCIe payload rate per lane, GB/s each direction, by generation (after line encoding).
PCIE_GBPS_PER_LANE = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


@dataclass
class GpuLinks:
    index: int
    name: str
    bus_id: str | None
    pcie_gen: int | None
    pcie_width: int | None
    pcie_max_gen: int | None
    pcie_max_width: int | None
    nvlink_links_up: int | None
    nvlink_version: int | None


@dataclass
class PairLink:
    a: int
    b: int
    kind: str            # "nvlink" | "pcie"
    label: str           # nvidia-smi's word: NV18, PIX, PXB, PHB, NODE, SYS
    pcie_path: str | None
    nvlink_links: int | None
    p2p: bool | None     # can the pair read each other's memory directly


LEGEND = N_("NV# = # NVLinks; PIX/PXB = PCIe switch(es); PHB = host bridge; NODE = within a NUMA node; "
            "SYS = across CPU sockets")


@dataclass
class Topology:
    gpus: list[GpuLinks] = field(default_factory=list)
    pairs: list[PairLink] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def pair(self, a: int, b: int) -> PairLink | None:
        return next((p for p in self.pairs if {p.a, p.b} == {a, b}), None)

    def matrix(self) -> str:
        """The `nvidia-smi topo -m` style grid, for reports."""
        if not self.gpus:
            return f"(no GPU topology: {self.error or 'no GPU'})"
        names = [f"GPU{g.index}" for g in self.gpus]
        lines = ["      " + "".join(f"{n:>7}" for n in names)]
        for g in self.gpus:
            cells = []
            for h in self.gpus:
                pair = self.pair(g.index, h.index)
                cells.append("X" if g.index == h.index else (pair.label if pair else "?"))
            lines.append(f"{'GPU' + str(g.index):<6}" + "".join(f"{c:>7}" for c in cells))
        lines.append(LEGEND)
        return "\n".join(lines)

    def weakest_link(self, indices: list[int] | None = None) -> PairLink | None:
        """The slowest pair among `indices` (all GPUs by default): it bounds a ring all-reduce."""
        chosen = set(indices if indices is not None else [g.index for g in self.gpus])
        pairs = [p for p in self.pairs if p.a in chosen and p.b in chosen]
        return min(pairs, key=lambda p: link_gbps(self, p) or 0.0, default=None)


def _bus_id(handle: Any) -> str | None:
    info = nvml.query("nvmlDeviceGetPciInfo", handle)
    bus = getattr(info, "busId", None)
    return bus.decode() if isinstance(bus, bytes) else bus


def _gpu_links(index: int, handle: Any) -> GpuLinks:
    uuid = nvml.query("nvmlDeviceGetUUID", handle)
    states = nvlink_link_states(handle, uuid)
    up = [i for i, s in enumerate(states) if s]
    return GpuLinks(
        index=index, name=nvml.query("nvmlDeviceGetName", handle, default="NVIDIA GPU"), bus_id=_bus_id(handle),
        pcie_gen=nvml.query("nvmlDeviceGetCurrPcieLinkGeneration", handle),
        pcie_width=nvml.query("nvmlDeviceGetCurrPcieLinkWidth", handle),
        pcie_max_gen=nvml.query("nvmlDeviceGetMaxPcieLinkGeneration", handle),
        pcie_max_width=nvml.query("nvmlDeviceGetMaxPcieLinkWidth", handle),
        nvlink_links_up=len(up) if states else None,
        nvlink_version=nvml.query("nvmlDeviceGetNvLinkVersion", handle, up[0]) if up else None,
    )


def _pair(a: GpuLinks, ha: Any, b: GpuLinks, hb: Any, n_gpus: int) -> PairLink:
    level = nvml.query("nvmlDeviceGetTopologyCommonAncestor", ha, hb)
    label, words = PCIE_LEVELS.get(level, ("?", N_("unknown PCIe path"))) if level is not None else ("?", None)
    nvlink_status = nvml.query("nvmlDeviceGetP2PStatus", ha, hb, P2P_CAPS_INDEX_NVLINK)
    read_status = nvml.query("nvmlDeviceGetP2PStatus", ha, hb, P2P_CAPS_INDEX_READ)
    p2p = None if read_status is None else read_status == P2P_STATUS_OK
    if nvlink_status == P2P_STATUS_OK:
        # Which links reach which peer is not knowable when remote PCI info is bogus; with two
        # GPUs every link up joins the pair, beyond that only "NVLink" is certain.
        links = min(a.nvlink_links_up or 0, b.nvlink_links_up or 0) if n_gpus == 2 else None
        return PairLink(a=a.index, b=b.index, kind="nvlink", label=f"NV{links}" if links else "NV",
                        pcie_path=words, nvlink_links=links, p2p=True)
    return PairLink(a=a.index, b=b.index, kind="pcie", label=label, pcie_path=words, nvlink_links=None, p2p=p2p)


def read_topology() -> Topology:
    """Every GPU's links and every pair's connection; `error` says why when there is no GPU."""
    if nvml.library() is None:
        return Topology(error=nvml.init_error())
    handles = gpu_handles()
    if not handles:
        return Topology(error=nvml.NONE_SEEN)
    gpus = [_gpu_links(i, h) for i, h in handles]
    pairs = []
    for x in range(len(handles)):
        for y in range(x + 1, len(handles)):
            pairs.append(_pair(gpus[x], handles[x][1], gpus[y], handles[y][1], len(handles)))
    return Topology(gpus=gpus, pairs=pairs)


def link_gbps(topo: Topology, pair: PairLink) -> float | None:
    """Nominal one-direction bandwidth of a pair's link, GB/s; None when unknown."""
    a = next((g for g in topo.gpus if g.index == pair.a), None)
    b = next((g for g in topo.gpus if g.index == pair.b), None)
    if a is None or b is None:
        return None
    if pair.kind == "nvlink":
        per_link = NVLINK_GBPS_PER_LINK.get(a.nvlink_version or 0, 25.0)
        return per_link * pair.nvlink_links if pair.nvlink_links else None
    lanes = [(g.pcie_max_gen or g.pcie_gen, g.pcie_max_width or g.pcie_width) for g in (a, b)]
    known = [(gen, width) for gen, width in lanes if gen is not None and width is not None]
    if len(known) < len(lanes):
        return None
    return min(PCIE_GBPS_PER_LANE.get(gen, 0.0) * width for gen, width in known)


def describe_link(topo: Topology, pair: PairLink, say: Callable[[str], str] = str) -> str:
    """'NVLink 4 ×18 (450 GB/s each way)' or 'PCIe gen5 ×16 via host bridge, P2P disabled'; in English
    (the report's record) unless `say` translates."""
    gbps = link_gbps(topo, pair)
    speed = say(N_(" ({gbps:.0f} GB/s each way)")).format(gbps=gbps) if gbps else ""
    if pair.kind == "nvlink":
        a = next(g for g in topo.gpus if g.index == pair.a)
        gen = NVLINK_GENERATION.get(a.nvlink_version or 0)
        count = f" ×{pair.nvlink_links}" if pair.nvlink_links else ""
        return f"NVLink{' ' + gen if gen else ''}{count}{speed}"
    a = next(g for g in topo.gpus if g.index == pair.a)
    lane = f" gen{a.pcie_max_gen or a.pcie_gen} ×{a.pcie_max_width or a.pcie_width}" if a.pcie_gen else ""
    p2p = {True: N_("P2P on"), False: N_("P2P disabled"), None: N_("P2P unknown")}[pair.p2p]
    return say(N_("PCIe only{lane} via {path}, {p2p}{speed}")).format(
        lane=lane, path=say(pair.pcie_path or N_("unknown path")), p2p=say(p2p), speed=speed)
