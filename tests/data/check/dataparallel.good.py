import os
from torch.nn.parallel import DistributedDataParallel as DDP

local_rank = int(os.environ["LOCAL_RANK"])
model = DDP(make_model().to(local_rank), device_ids=[local_rank])
