"""The run layer: launch, supervise and follow runs; records, events, tails, detectors. Torch-free."""
