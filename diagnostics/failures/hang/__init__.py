"""Hangs: the ranks' stacks and Flight Recorder dumps read, compared and watched live."""
