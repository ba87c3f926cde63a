"""Checkers on the offset order of each key: ``duplicate`` and ``inconsistent-offsets``.

Source: Jepsen's ``jepsen.tests.kafka`` (``jepsen/src/jepsen/tests/kafka.clj``):
``version-orders`` (whose ``:errors`` are reported as ``:inconsistent-offsets``) and
``duplicate-cases``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kafka_chaos.analysis.checkers.common import MAX_OPS_PER_EXAMPLE, cases


def _sorted_set(col: str, limit: int | None = None) -> Column:
    s = F.array_sort(F.collect_set(col))
    return F.slice(s, 1, limit) if limit else s


def _one_with_many(obs: DataFrame, one: str, many: str, plural: str, kind: str) -> DataFrame:
    """Cases of ``kind``: each (key, ``one``) observed with more than one ``many``."""
    found = (obs.groupBy("key", one)
             .agg(_sorted_set(many).alias(plural),
                  _sorted_set("op", MAX_OPS_PER_EXAMPLE).alias("op_indexes"))
             .where(F.size(plural) > 1))
    return cases(found, F.lit(kind), ["key", one], ["key", one, plural, "op_indexes"])


def duplicates(obs: DataFrame) -> DataFrame:
    """Count ``duplicate``: one value at more than one distinct offset of a key.

    Rule (Jepsen ``duplicate-cases``): "cases where a single value appears at more than one
    offset in a key", from the version order, which combines every poll's records and the
    acknowledged sends' offsets (``versions.observations``). Values are unique per run, so any
    second offset is a second copy of the record in the log (e.g. a producer retry without
    idempotence).

    Args:
        obs: ``versions.observations`` (``key, offset, value, op``).

    Returns the cases (``common.cases``); one per (key, value), each with ``key, value,
    offsets`` (sorted) and ``op_indexes`` (invoke indexes of ops that saw it, first 10).
    """
    return _one_with_many(obs, "value", "offset", "offsets", "duplicate")


def inconsistent_offsets(obs: DataFrame) -> DataFrame:
    """Count ``inconsistent-offsets``: one (key, offset) observed with several values.

    Rule (Jepsen ``version-orders`` ``:errors``, analysis step 2): "We verify that all sends and
    polls agree on the value for a given key and offset ... If we find divergence, we know that
    Kakfa [sic] disagreed about the value at some offset." A send acknowledged at offset o while
    a poll reads another value at o counts, as do two polls disagreeing (a log truncated and
    rewritten after an unclean leader election).

    Args:
        obs: ``versions.observations``.

    Returns the cases (``common.cases``); one per (key, offset), each with ``key, offset,
    values`` (sorted) and ``op_indexes`` (first 10).
    """
    return _one_with_many(obs, "offset", "value", "values", "inconsistent-offsets")
