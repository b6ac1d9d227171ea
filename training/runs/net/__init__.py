"""Runs across nodes: the multi-node plan, the network path to another node, and the probe between two nodes."""
