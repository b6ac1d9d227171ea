"""Probes and analysis: machine summary, NVML/psutil sampling, benchmarks, failure classifier.

Headless: never imports textual or rich.
"""
