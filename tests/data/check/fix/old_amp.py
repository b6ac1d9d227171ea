"""torch.cuda.amp on a CPU run: deprecated, and it says so on every rank."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
scaler = torch.cuda.amp.GradScaler(enabled=False)
print(f"rank {dist.get_rank()} scaler enabled: {scaler.is_enabled()}", flush=True)
dist.destroy_process_group()
