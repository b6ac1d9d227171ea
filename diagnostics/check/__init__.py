"""Script check (`mgtutor check`): reads a training script and names the classic multi-GPU mistakes."""
