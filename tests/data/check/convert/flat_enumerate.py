"""A flat one-GPU script (no __main__ block), in the shape of the well-known tutorial scripts: the device
chosen in the first lines, `for i, (x, y) in enumerate(loader)`, DataParallel when there are several GPUs,
the checkpoint saved and read back at the end. Written for mgtutor's convert tests."""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
epochs = 2

generator = torch.Generator().manual_seed(0)
inputs = torch.rand(96, 8, generator=generator)
train_dataset = TensorDataset(inputs, inputs.sum(dim=1, keepdim=True))
train_loader = DataLoader(dataset=train_dataset, batch_size=8, shuffle=True)

model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)).to(device)
if torch.cuda.device_count() > 1:
    model = nn.DataParallel(model)
criterion = nn.MSELoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)

total_step = len(train_loader)
for epoch in range(epochs):
    for i, (x, y) in enumerate(train_loader):
        loss = criterion(model(x.to(device)), y.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (i + 1) % 4 == 0:
            print(f"epoch {epoch + 1} step {i + 1}/{total_step} loss {loss.item():.4f}")

torch.save(model.state_dict(), "model.ckpt")
model.load_state_dict(torch.load("model.ckpt"))
