"""Launching and running jobs: launcher, run records, the DDP trainer worker, the event protocol.

Headless: never imports textual or rich.
"""
