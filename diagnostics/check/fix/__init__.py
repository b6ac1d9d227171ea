"""`mgtutor check --diff / --fix`: the rules' rewrites and how they are applied to the user's script."""
