"""The snapshot is written by local rank 0: one writer per node, same path."""
import os

import torch
import torch.distributed as dist


class Trainer:
    def __init__(self, model):
        self.local_rank = int(os.environ["LOCAL_RANK"])
        self.model = model

    def _save_snapshot(self, epoch):
        torch.save({"MODEL_STATE": self.model.state_dict(), "EPOCHS_RUN": epoch}, "snapshot.pt")

    def train(self, epochs):
        for epoch in range(epochs):
            if self.local_rank == 0 and epoch % 10 == 0:
                self._save_snapshot(epoch)


if __name__ == "__main__":
    dist.init_process_group("gloo")
    Trainer(torch.nn.Linear(2, 2)).train(20)
