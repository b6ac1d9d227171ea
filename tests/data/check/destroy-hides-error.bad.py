import argparse

import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, required=True)
    parser.parse_args()
    dist.init_process_group("gloo")


if __name__ == "__main__":
    try:
        main()
    finally:
        dist.destroy_process_group()
