"""A one-GPU script in the shape of pytorch/examples' MNIST: main(), an accelerator branch that picks the
device and adds loader options (shuffle among them) to **kwargs dicts, a callback that reports and saves
at the end of each epoch, the best model kept in a branch on the validation loss and read back at the end.
Written for mgtutor's convert tests."""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 1)

    def features(self, x):
        return F.relu(self.body(x))

    def forward(self, x):
        return self.head(self.features(x))


def make_set(size, seed):
    inputs = torch.rand(size, 8, generator=torch.Generator().manual_seed(seed))
    return TensorDataset(inputs, inputs.sum(dim=1, keepdim=True))


def train(model, device, loader, optimizer, epoch, on_epoch_end):
    model.train()
    for batch_idx, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = F.mse_loss(model(x.to(device)), y.to(device))
        loss.backward()
        optimizer.step()
    on_epoch_end(epoch, loss.item())


def validate(model, device, loader):
    model.eval()
    with torch.no_grad():
        return sum(F.mse_loss(model(x.to(device)), y.to(device)).item() for x, y in loader)


def report(epoch, loss):
    print(f"epoch {epoch} train loss {loss:.4f}")
    torch.save({"epoch": epoch}, "last_epoch.pt")


def main():
    parser = argparse.ArgumentParser(description="accelerator branch and **kwargs loaders")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--no-accel", action="store_true")
    args = parser.parse_args()
    use_accel = not args.no_accel and torch.cuda.is_available()
    if use_accel:
        device = torch.device("cuda")
    else:
        device = torch.device("cpu")
    train_kwargs = {"batch_size": 8}
    test_kwargs = {"batch_size": 16}
    loader_kwargs = {"shuffle": True}
    if use_accel:
        loader_kwargs.update({"num_workers": 1, "pin_memory": True})
    train_kwargs.update(loader_kwargs)
    train_loader = DataLoader(make_set(128, 0), **train_kwargs)
    test_loader = DataLoader(make_set(32, 1), **test_kwargs)
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    best = None
    for epoch in range(1, args.epochs + 1):
        train(model, device, train_loader, optimizer, epoch, on_epoch_end=report)
        val_loss = validate(model, device, test_loader)
        if best is None or val_loss < best:
            torch.save(model.state_dict(), "best.pt")
            best = val_loss
    model.load_state_dict(torch.load("best.pt"))
    print("features of one sample:", model.features(torch.zeros(1, 8).to(device)).shape)


if __name__ == "__main__":
    main()
