import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
model = DDP(make_model())
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
