"""Doctor and probes: versions, devices, topology, limits, rendezvous probe; saved reports."""
