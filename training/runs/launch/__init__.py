"""Starting and stopping runs: the launcher (torchrun's argv), the supervisor, the per-rank wrapper, every process of a run, control from any terminal, and the trainer's options."""
