import torch.distributed as dist

dist.init_process_group("gloo")
master_process = dist.get_rank() == 0
for epoch in range(3):
    loss = run_epoch()
    if master_process:
        print(f"epoch {epoch} loss {loss:.3f}")
