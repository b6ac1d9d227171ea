import torch.distributed as dist

dist.init_process_group("gloo")
for epoch in range(3):
    loss = run_epoch()
    print(f"epoch {epoch} loss {loss:.3f}")
