"""`datalint serve`: the scanner as one long-running HTTP service for a team and its training cluster.

The service owns a data directory with one folder per dataset, each holding today's scan index
(`index.db`) and quarantine list (`quarantine.json`), so every CLI command and `datalint report`
work on its files. Modules: `config` (the TOML file, validated), `auth` (bearer tokens, hashed),
`registry` (datasets and their files), `jobs` (scans as child processes), `ingest` (guard failures,
group-committed), `app` (the HTTP routes). Only `app` and `server` import FastAPI.
"""
