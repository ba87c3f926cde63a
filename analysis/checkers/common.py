"""What every checker returns: a count and a few examples, as plain JSON-able data."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame

#: Examples per anomaly type: enough to start debugging, small enough to print.
MAX_EXAMPLES = 5

#: Op-index lists inside one example are cut to this many (a value may be read by every poll).
MAX_OPS_PER_EXAMPLE = 10


def summarize(cases: DataFrame, order_by: list[str | Column]) -> dict[str, Any]:
    """``{"count": n, "examples": [dict, ...]}`` for a DataFrame with one row per anomaly.

    Examples are the first ``MAX_EXAMPLES`` rows in ``order_by`` order (so results are
    deterministic), each row as a dict with its columns as keys.
    """
    cases = cases.cache()
    try:
        count = cases.count()
        rows = cases.orderBy(*order_by).limit(MAX_EXAMPLES).collect() if count else []
    finally:
        cases.unpersist()
    return {"count": count, "examples": [row.asDict(recursive=True) for row in rows]}
