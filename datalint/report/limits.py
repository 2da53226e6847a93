"""The policy limits drawn on the duration and size charts.

"Slow" and "oversized" are decided by the scan's policy from the whole index, with the policy
options stored in the run, so the report asks that same policy where its limits lie rather than
keeping a second copy of the formula. An index the policy cannot judge (a guard-only index, a
policy without these limits) still gets a line: at the smallest value its findings flagged.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from datalint.index import read, report_queries
from datalint.report.charts import Threshold

# finding kind -> (chart column, label on the chart)
LIMITED_KINDS = {"slow": ("duration", "slow above"), "oversized": ("nbytes", "oversized above")}


def policy_thresholds(conn: sqlite3.Connection, run_options: dict[str, Any] | None) -> dict[str, Threshold]:
    """Chart column ("duration", "nbytes") -> the limit to draw on it."""
    limits = _from_policy(conn, run_options) if run_options is not None else None
    if limits is None:
        limits = _from_findings(conn)
    return {
        LIMITED_KINDS[kind][0]: Threshold(LIMITED_KINDS[kind][1], value)
        for kind, value in limits.items()
        if value is not None and value > 0
    }


def _from_policy(conn: sqlite3.Connection, run_options: dict[str, Any]) -> dict[str, float | None] | None:
    try:
        from datalint.scan import policy

        options = policy.PolicyOptions.from_dict(run_options.get("policy") or {})
        peers = policy.population(conn)
        # the policy's own limit functions: the same numbers that decided the findings
        return {"oversized": policy.size_limit(peers, options), "slow": policy.slow_limit(peers, options)}
    except (ImportError, AttributeError, TypeError, ValueError):
        return None  # run options this policy cannot read (an index written by another version)


def _from_findings(conn: sqlite3.Connection) -> dict[str, float | None]:
    """Where flagging started, as the data shows it: the smallest value flagged with each kind."""
    if not read.has_tables(conn, ("findings",)):
        return {}
    smallest = report_queries.smallest_flagged
    return {kind: smallest(conn, kind, column) for kind, (column, _) in LIMITED_KINDS.items()}
