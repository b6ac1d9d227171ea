"""`__builtin__.print` replaced in this very file, the way DeiT's utils do it."""
import builtins as __builtin__
import datetime
import os

import torch.distributed as dist


def setup_for_distributed(is_master):
    builtin_print = __builtin__.print

    def print(*args, **kwargs):
        if is_master or kwargs.pop("force", False):
            builtin_print(*args, **kwargs)

    __builtin__.print = print


def main():
    dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=5))
    setup_for_distributed(int(os.environ["RANK"]) == 0)
    print("ready")


if __name__ == "__main__":
    main()
