"""Benchmarks: the standard workload (``workload``) and the runner that measures it."""
