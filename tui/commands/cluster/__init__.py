"""`mgtutor slurm` and `mgtutor k8s`: job files for a multi-node run, and the flags they share."""
