"""The training path behind `datalint.torch`: quarantine lists, staleness checks, the guard's record.

Nothing here imports torch; `datalint.torch` holds the samplers and the guard, which do.
"""
