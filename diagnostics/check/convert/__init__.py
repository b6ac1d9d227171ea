"""`mgtutor convert`: a plain one-GPU training script made a DDP script that torchrun runs."""
