"""The scan half: per-sample probes in isolated workers, one SQLite writer, quarantine policy."""
