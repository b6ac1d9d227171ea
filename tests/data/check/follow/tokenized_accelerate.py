"""Accelerate with a tokenized Hugging Face data set: mapped once, held as Arrow tables."""
from accelerate import Accelerator
from datasets import load_dataset
from torch.utils.data import DataLoader


def main():
    accelerator = Accelerator()
    raw = load_dataset("glue", "mrpc")
    with accelerator.main_process_first():
        tokenized = raw.map(lambda batch: {"n": len(batch["sentence1"])}, batched=True)
    tokenized = tokenized.rename_column("label", "labels")
    tokenized.set_format("torch")
    train = DataLoader(tokenized["train"], shuffle=True, batch_size=32)
    evaluation = DataLoader(tokenized["validation"], batch_size=32)
    return accelerator.prepare(train, evaluation)


if __name__ == "__main__":
    main()
