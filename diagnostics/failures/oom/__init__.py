"""CUDA out of memory: explained with numbers, the batch that fits, the rerun that records the allocator."""
