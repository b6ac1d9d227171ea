"""Downloads that do not race: inside main_process_first / rank_zero_first, or only on rank 0."""
from accelerate import Accelerator
from torchvision import datasets


def main():
    accelerator = Accelerator()
    with accelerator.main_process_first():
        train = datasets.CIFAR10("data", train=True, download=True)
    test = datasets.CIFAR10("data", train=False, download=accelerator.is_main_process)
    return train, test


if __name__ == "__main__":
    main()
