"""A one-GPU script in the shape of pytorch/examples' VAE: the device and the DataLoaders made at module
level (each data set built inside its DataLoader call, options in **kwargs), the model used through one of
its own methods, the epoch loop under `if __name__ == "__main__":`. Written for mgtutor's convert tests."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

use_cuda = torch.cuda.is_available()
if use_cuda:
    device = torch.device("cuda")
else:
    device = torch.device("cpu")

kwargs = {"num_workers": 1, "pin_memory": True} if use_cuda else {}
train_loader = DataLoader(TensorDataset(torch.rand(128, 8, generator=torch.Generator().manual_seed(0))),
                          batch_size=16, shuffle=True, **kwargs)
test_loader = DataLoader(TensorDataset(torch.rand(32, 8, generator=torch.Generator().manual_seed(1))),
                         batch_size=16, shuffle=False, **kwargs)


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(8, 2)
        self.dec = nn.Linear(2, 8)

    def decode(self, z):
        return torch.sigmoid(self.dec(z))

    def forward(self, x):
        return self.decode(F.relu(self.enc(x)))


model = AutoEncoder().to(device)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)


def train(epoch):
    model.train()
    for (x,) in train_loader:
        optimizer.zero_grad()
        loss = F.mse_loss(model(x.to(device)), x.to(device))
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")


if __name__ == "__main__":
    for epoch in range(1, 3):
        train(epoch)
        with torch.no_grad():
            sample = model.decode(torch.randn(4, 2).to(device))
        torch.save(sample, f"sample_{epoch}.pt")
