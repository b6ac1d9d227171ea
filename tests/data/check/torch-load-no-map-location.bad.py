"""A trainer that resumes from its own snapshot: every rank loads it onto the GPU it was saved from."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, snapshot_path):
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.model = model.to(self.gpu_id)
        if os.path.exists(snapshot_path):
            snapshot = torch.load(snapshot_path)
            self.model.load_state_dict(snapshot["MODEL_STATE"])
        self.model = DDP(self.model, device_ids=[self.gpu_id])

    def save(self, path):
        if self.gpu_id == 0:
            torch.save({"MODEL_STATE": self.model.module.state_dict()}, path)


def main():
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    Trainer(torch.nn.Linear(4, 4), "snapshot.pt").save("snapshot.pt")


if __name__ == "__main__":
    main()
