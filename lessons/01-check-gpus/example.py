"""Lesson 1: what PyTorch can see on this machine. Run: python example.py [--require-gpu]"""
import argparse
import json
import sys

import torch


def report(**fields):
    """One line a tutor (or a grep) can read back; plain print, no dependency."""
    print("REPORT " + json.dumps(fields), flush=True)


def dotted_cudnn(version):
    """cuDNN says 92400 for 9.24.0 (and 8902 for 8.9.2 before version 9)."""
    if not version:
        return None
    if version >= 10000:
        return f"{version // 10000}.{version % 10000 // 100}.{version % 100}"
    return f"{version // 1000}.{version % 1000 // 100}.{version % 100}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--require-gpu", action="store_true", help="fail when no GPU can compute")
    args = parser.parse_args()

    cuda = torch.cuda.is_available()
    count = torch.cuda.device_count() if cuda else 0
    print(f"PyTorch {torch.__version__}, built for CUDA {torch.version.cuda}")
    print(f"CUDA usable: {cuda}, GPUs visible to this process: {count}")
    # The versions this build carries: a CUDA build has them even on a machine without a GPU.
    nccl = None
    if torch.version.cuda and hasattr(torch.cuda, "nccl"):
        try:
            version = torch.cuda.nccl.version()
            nccl = ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
        except (RuntimeError, AttributeError):
            nccl = None
    cudnn = dotted_cudnn(torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None)
    built = f"NCCL {nccl or 'not in this build'}; cuDNN {cudnn or 'not in this build'}"
    print(built + ("" if cuda else " (no usable GPU here: gloo is the backend on CPU)"))

    names, computed = [], []
    for index in range(count):
        props = torch.cuda.get_device_properties(index)
        names.append(props.name)
        print(f"  cuda:{index}  {props.name}  {props.total_memory / 2**30:.1f} GiB  "
              f"compute capability {props.major}.{props.minor}")
        a = torch.randn(256, 256)
        on_gpu = (a.to(f"cuda:{index}") @ a.to(f"cuda:{index}")).cpu()
        computed.append(bool(torch.allclose(on_gpu, a @ a, rtol=1e-2, atol=1e-2)))

    peer = None
    if count >= 2:
        peer = bool(torch.cuda.can_device_access_peer(0, 1))
        print(f"GPU 0 can read GPU 1's memory directly (P2P): {peer}")
    if count == 0:
        print("No GPU here: the lessons run their ranks as CPU processes on the gloo backend.")

    report(torch=torch.__version__, cuda=torch.version.cuda, cuda_available=cuda, gpus=count,
           nccl=nccl, names=names, peer_access=peer,
           every_gpu_computed=bool(computed) and all(computed))
    if args.require_gpu and not (computed and all(computed)):
        print("error: no GPU computed a correct result", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
