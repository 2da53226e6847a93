"""Loader diagnosis: `doctor` reads the host and judges a DataLoader config before training; `bench`
runs the real DataLoader (worker sweeps, soaks) and reports what it measured.

The dependency runs one way: `bench` imports `doctor` (limits, headroom, fixes), never the reverse;
both read the host (processes, memory, /dev/shm) through `datalint.host`, which imports neither.
"""
