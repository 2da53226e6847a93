"""The static half: rule catalog, parsed modules, matchers, engine and output formats."""
