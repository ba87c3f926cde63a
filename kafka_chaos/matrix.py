"""Comparison matrices (``kafka-chaos compare``): settings, each with values, multiplied out
into cells, as ducktape's ``@matrix`` does for Kafka's system tests.

A setting is named as the ``run`` option (``min-insync-replicas``), as its ``RunConfig`` field
(``min_insync_replicas``), as the Kafka config it sets (``min.insync.replicas``,
``enable.idempotence``, ``unclean.leader.election.enable``,
``max.in.flight.requests.per.connection``), or by a short alias (``unclean``, ``kafka``): the
names of the settings table (``kafka_chaos.settings``).
Values are what the option takes; a ``nemesis`` value joins faults with ``+``
(``kill+partition``), as the comma separates values.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from typing import Annotated, Any

from pydantic import TypeAdapter, ValidationError

from kafka_chaos.catalogue.faults import parse_packages
from kafka_chaos.config import SETTINGS, RunConfig, parse_range

#: Names users write -> ``RunConfig`` field (after ``.`` and ``-`` become ``_``): each
#: setting's field, flag, Kafka property, label and aliases (``settings.Setting.names``).
ALIASES = {name: field for field, s in SETTINGS.items() for name in s.names()}
#: Fields a matrix may not vary, and why.
FIXED = {field: s.fixed for field, s in SETTINGS.items() if s.fixed}
#: How a field is shown in cell names (Kafka's spelling where there is one).
LABELS = {field: s.label for field, s in SETTINGS.items()}
_UNSAFE = re.compile(r"[^A-Za-z0-9=.,+_-]+")


def field_of(key: str) -> str:
    """The ``RunConfig`` field a matrix key names. Raises ``ValueError`` naming the key (and
    why, for a field a matrix may not vary)."""
    name = key.strip().lower().replace("-", "_").replace(".", "_")
    name = ALIASES.get(name, name)
    if name not in SETTINGS:
        raise ValueError(f"{key!r} is no run setting; e.g. acks, min.insync.replicas, unclean, "
                         "idempotence, max.in.flight, kafka_version, nemesis (any run option)")
    if name in FIXED:
        raise ValueError(f"{key!r} cannot vary across cells: {FIXED[name]}")
    return name


def coerce(field: str, value: Any) -> Any:
    """``value`` (text from the command line, or a YAML value) as ``RunConfig`` holds
    ``field``: checked against the field's type and bounds. Raises ``ValueError``."""
    if field == "nemesis":
        text = "+".join(map(str, value)) if isinstance(value, list) else str(value)
        return parse_packages(text.replace("+", ","))
    if field == "ops_per_txn":
        if isinstance(value, list):
            value = "..".join(map(str, value))
        return parse_range(str(value))
    if field == "acks" and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # YAML reads acks: 1 as a number
    info = RunConfig.model_fields[field]
    kind = Annotated[info.annotation, *info.metadata] if info.metadata else info.annotation
    try:
        return TypeAdapter(kind).validate_python(value)
    except ValidationError as exc:
        raise ValueError(exc.errors()[0]["msg"]) from None


def show(value: Any) -> str:
    """A value as cell names and tables show it (``kill+partition``, ``true``, ``1..4``)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "+".join(map(str, value)) or "none"
    if isinstance(value, tuple):
        return f"{value[0]}..{value[1]}"
    return str(value)


@dataclasses.dataclass(frozen=True)
class Dimension:
    """One setting of the matrix: its ``RunConfig`` ``field`` and the ``values`` it takes,
    in the order given."""

    field: str
    values: tuple[Any, ...]

    @property
    def label(self) -> str:
        """The setting as shown in tables (``min.insync.replicas``)."""
        return LABELS.get(self.field, self.field)


def dimension(key: str, values: list[Any], where: str) -> Dimension:
    """A ``Dimension`` from a key and its raw values; ``where`` names the source in errors
    (``--matrix acks=...``, ``matrix.acks``). Raises ``ValueError``."""
    try:
        field = field_of(key)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    if not values:
        raise ValueError(f"{where}: no value")
    out = []
    for raw in values:
        try:
            value = coerce(field, raw)
        except ValueError as exc:
            raise ValueError(f"{where}: {raw!r}: {exc}") from None
        if value in out:
            raise ValueError(f"{where}: {show(value)} given twice")
        out.append(value)
    return Dimension(field, tuple(out))


def parse_option(text: str) -> Dimension:
    """``--matrix KEY=V1,V2,...`` -> ``Dimension``. Raises ``ValueError`` naming the option."""
    where = f"--matrix {text}"
    key, sep, values = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"{where}: write KEY=VALUE,VALUE (e.g. acks=1,all)")
    return dimension(key, [v.strip() for v in values.split(",") if v.strip()], where)


def check_distinct(dims: list[Dimension]) -> list[Dimension]:
    """``dims`` unless two vary the same field (``ValueError`` naming it)."""
    seen: set[str] = set()
    for dim in dims:
        if dim.field in seen:
            raise ValueError(f"--matrix: {dim.label} is given twice")
        seen.add(dim.field)
    return dims


@dataclasses.dataclass(frozen=True)
class Cell:
    """One combination of the matrix: ``settings`` (field -> value, in matrix order), its
    ``label`` (``acks=1 min.insync.replicas=2``) and ``id`` (``01_acks=1_min.insync...``, the
    cell's directory name)."""

    id: str
    label: str
    settings: dict[str, Any]


def cells(dims: list[Dimension]) -> list[Cell]:
    """Every combination of ``dims`` (the first varies slowest); one cell ``base`` when the
    matrix is empty (a comparison of repeats only)."""
    out = []
    combos = list(itertools.product(*(d.values for d in dims)))
    for n, combo in enumerate(combos, 1):
        parts = [f"{d.label}={show(v)}" for d, v in zip(dims, combo)]
        label = " ".join(parts) or "base"
        slug = _UNSAFE.sub("-", "_".join(parts) or "base")[:120]
        out.append(Cell(f"{n:0{len(str(len(combos)))}d}_{slug}", label,
                        {d.field: v for d, v in zip(dims, combo)}))
    return out
