import torch.distributed as dist

dist.init_process_group("gloo")
model = make_model()
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
