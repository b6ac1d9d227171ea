"""Accelerate prepares the DataLoader (its sampler) and the device; rank-0 work is guarded."""
import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader

accelerator = Accelerator(mixed_precision="bf16")
loader = DataLoader(dataset, batch_size=32, shuffle=True)
model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
for epoch in range(3):
    for x, y in loader:
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        torch.save(accelerator.unwrap_model(model).state_dict(), "model.pt")
