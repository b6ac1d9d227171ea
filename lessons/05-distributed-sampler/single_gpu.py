"""Lesson 5: a plain one-device training script, the kind you start from. `mgtutor convert` turns it into
the DDP script single_gpu_ddp.py (shown in the lesson); nothing here knows about ranks.

    python single_gpu.py
"""
import json
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


def report(**fields):
    """One fact for the lesson's checks, tagged with the process that measured it."""
    print("REPORT " + json.dumps({"pid": os.getpid(), **fields}), flush=True)


class Numbered(Dataset):
    """Seeded pairs; each item also gives its index, so the lesson can show who read which sample."""

    def __init__(self, size=256, features=8):
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(size, features, generator=generator)
        self.y = self.x.sum(dim=1, keepdim=True) + 0.5 * torch.randn(size, 1, generator=generator)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, index):
        return index, self.x[index], self.y[index]


def main():
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    data = Numbered()
    loader = DataLoader(data, batch_size=16, shuffle=True)
    model = nn.Linear(8, 1).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        seen = []
        for index, x, y in loader:
            seen += index.tolist()
            loss = nn.functional.mse_loss(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch}: loss {loss.item():.4f}")
        report(epoch=epoch, indices=seen, dataset_size=len(data))
    torch.save(model.state_dict(), os.path.join(os.environ.get("MGTUTOR_RUN_DIR", "."), "single_gpu.pt"))
    report(weight_sum=round(float(sum(p.sum() for p in model.parameters())), 6))


if __name__ == "__main__":
    main()
