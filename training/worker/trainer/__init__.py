"""The built-in trainer's parts: its loop, steps, data, models, gradient sync, compiling, injected failures."""
