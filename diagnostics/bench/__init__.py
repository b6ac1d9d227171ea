"""Bandwidth and scaling benchmarks: the all-reduce bench (nccl-tests formulas) and bench scaling."""
