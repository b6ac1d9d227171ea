"""Launching and running jobs.

`runs/` is the torch-free run layer (launcher, supervisor, records, events, the follow loop);
`worker/` is the DDP trainer that runs under torchrun and imports torch.
"""
