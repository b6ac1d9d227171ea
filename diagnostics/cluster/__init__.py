"""Job files for cluster schedulers (Slurm)."""
