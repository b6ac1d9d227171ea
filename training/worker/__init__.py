"""The DDP trainer worker: runs under torchrun, imports torch, never imported by the TUI."""
