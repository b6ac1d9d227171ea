"""A one-GPU training script of the shape of the DDP tutorial series' single-GPU version: a Trainer,
a DataLoader that shuffles, a checkpoint every few epochs. Written for mgtutor's tests."""
import argparse
import json
import os

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class NumberPairs(Dataset):
    """Fixed pairs (seeded), and which indices this process read (for the sharding test)."""

    def __init__(self, size):
        generator = torch.Generator().manual_seed(0)
        self.inputs = torch.rand(size, 20, generator=generator)
        self.targets = self.inputs.sum(dim=1, keepdim=True) * 0.1
        self.seen = []

    def __len__(self):
        return len(self.inputs)

    def __getitem__(self, index):
        self.seen.append(index)
        return self.inputs[index], self.targets[index]


class Trainer:
    def __init__(self, model, train_data, optimizer, gpu_id, save_every):
        self.gpu_id = gpu_id
        self.model = model.to(gpu_id)
        self.train_data = train_data
        self.optimizer = optimizer
        self.save_every = save_every

    def _run_batch(self, source, targets):
        self.optimizer.zero_grad()
        output = self.model(source)
        loss = F.mse_loss(output, targets)
        loss.backward()
        self.optimizer.step()

    def _run_epoch(self, epoch):
        print(f"Epoch {epoch} | Steps: {len(self.train_data)}")
        for source, targets in self.train_data:
            source = source.to(self.gpu_id)
            targets = targets.to(self.gpu_id)
            self._run_batch(source, targets)

    def _save_checkpoint(self, epoch):
        ckp = self.model.state_dict()
        torch.save(ckp, "checkpoint.pt")
        print(f"Epoch {epoch} | Training checkpoint saved at checkpoint.pt")

    def train(self, max_epochs):
        for epoch in range(max_epochs):
            self._run_epoch(epoch)
            if epoch % self.save_every == 0:
                self._save_checkpoint(epoch)

    def full_loss(self):
        with torch.no_grad():
            inputs = self.train_data.dataset.inputs.to(self.gpu_id)
            targets = self.train_data.dataset.targets.to(self.gpu_id)
            return F.mse_loss(self.model(inputs), targets).item()


def load_train_objs():
    torch.manual_seed(0)
    train_set = NumberPairs(256)
    model = torch.nn.Linear(20, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    return train_set, model, optimizer


def prepare_dataloader(dataset, batch_size, shuffle):
    return DataLoader(dataset, batch_size=batch_size, pin_memory=False, shuffle=shuffle)


def main(device, total_epochs, save_every, batch_size, shuffle):
    dataset, model, optimizer = load_train_objs()
    train_data = prepare_dataloader(dataset, batch_size, shuffle)
    trainer = Trainer(model, train_data, optimizer, device, save_every)
    trainer.train(total_epochs)
    loss = trainer.full_loss()
    print(f"loss after {total_epochs * len(dataset)} samples: {loss:.8f}")
    if os.environ.get("SEEN_DIR"):
        with open(os.path.join(os.environ["SEEN_DIR"], f"{os.getpid()}.json"), "w") as seen:
            json.dump(dataset.seen, seen)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="simple distributed training job")
    parser.add_argument("--epochs", type=int, default=2, help="how many epochs to train")
    parser.add_argument("--save-every", type=int, default=1, help="how often to save a snapshot")
    parser.add_argument("--batch-size", type=int, default=32, help="input batch size")
    parser.add_argument("--device", default="cuda", help="the one device to train on")
    parser.add_argument("--no-shuffle", action="store_true", help="read the data in order")
    args = parser.parse_args()
    device = args.device
    main(device, args.epochs, args.save_every, args.batch_size, not args.no_shuffle)
