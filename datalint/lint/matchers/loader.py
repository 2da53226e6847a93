"""Matchers for the loader rules."""

from __future__ import annotations

from typing import Any

MATCHERS: dict[str, Any] = {}
