import datetime
import torch.distributed as dist

dist.init_process_group("gloo", timeout=datetime.timedelta(minutes=5))
