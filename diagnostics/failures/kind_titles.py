"""What each kind of failure is called where a person reads it: a diagnosis's headline, a hang report's
title, the Monitor's banner. The message id is the kind id itself: English shows the id (what `--json`,
the failure catalogue and a search say), a translation says what it means (rendezvous 超时); the
comment beside each is the meaning a translation says. A kind without an entry is shown as its id."""
from __future__ import annotations

from mgtutor.training.foundation.i18n import N_, _

TITLED = frozenset({
    N_("port_in_use"),  # the rendezvous port is already in use
    N_("rendezvous_timeout"),  # rendezvous timed out
    N_("rendezvous_unreachable"),  # the rendezvous store cannot be reached
    N_("hostname_unresolvable"),  # a host name does not resolve
    N_("nccl_init_timeout"),  # NCCL initialisation timed out
    N_("cuda_oom"),  # out of GPU memory
    N_("host_oom_killed"),  # killed for host memory (the OOM killer)
    N_("shm_exhausted"),  # shared memory (/dev/shm) is full
    N_("dataloader_worker_killed"),  # a DataLoader worker died
    N_("duplicate_gpu"),  # two ranks on one GPU
    N_("nccl_error"),  # an NCCL error
    N_("collective_timeout"),  # a collective timed out
    N_("watchdog_stuck"),  # NCCL's watchdog found a stuck collective
    N_("ddp_unused_parameters"),  # DDP: parameters that got no gradient
    N_("process_group_not_initialized"),  # the process group is not initialised
    N_("invalid_device_ordinal"),  # no GPU with that number
    N_("collective_mismatch"),  # the ranks ran different collectives
    N_("cuda_driver_too_old"),  # the NVIDIA driver is too old for this CUDA
    N_("no_cuda_driver"),  # no NVIDIA driver
    N_("nccl_without_gpu"),  # NCCL without a GPU
    N_("nan_loss"),  # the loss became NaN
    N_("straggler"),  # a slow rank (straggler)
    N_("no_distributed_sampler"),  # every rank saw the same data (no DistributedSampler)
    N_("dataset_download_failed"),  # a data set download failed
    N_("exit_abort"),  # a rank aborted (SIGABRT)
    N_("child_failed"),  # a rank failed
    N_("world_size_mismatch"),  # the ranks disagree on the world size
    N_("rank_outside_collective"),  # a rank is outside the collective
})


def kind_title(kind: str | None) -> str:
    """The kind's title in the language in force; its id where it has none (a kind of a newer version)."""
    if not kind:
        return ""
    return _(kind) if kind in TITLED else kind
