"""The training path behind `datalint.torch`: quarantine lists, staleness checks, samplers, the guard.

Only `samplers` and `guard` import torch; users reach them through `datalint.torch`, which names the
[torch] extra when it is missing. The other modules here are standard library (plus numpy where noted).
"""
