"""Diagnoses told from the script a run ran, read statically beside its logs."""
