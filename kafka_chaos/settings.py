"""The settings table: what each ``RunConfig`` field is called where users meet it.

Every field of ``kafka_chaos.config.RunConfig`` is declared with ``setting()``, which keeps
its default, bounds and help as pydantic does and adds one ``Setting``: its ``run`` flag, its
plan file section and key, the Kafka property it sets and on which configuration (broker,
producer or consumer), its label in tables, its unit, the matrix's other names for it and
why a comparison may not vary it. From that one table come
the ``run`` options (``kafka_chaos.cli.flags``), the plan file's sections
(``kafka_chaos.plan``), the matrix's names (``kafka_chaos.matrix``), the rerun
command (``kafka_chaos.options.command_of``), the report's settings
(``kafka_chaos.report.html``) and the brokers' and clients' configurations
(``RunConfig.broker_config``, ``workloads.settings.WorkloadSettings``), so a setting is
written once.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pydantic import Field

#: Plan file sections, in file order; ``""`` is the top level (``seed``).
SECTIONS = ("cluster", "topics", "workload", "nemesis", "checkers", "")
#: The configurations a setting's Kafka property goes into as it is (``Setting.role``).
ROLES = ("broker", "producer", "consumer")


@dataclasses.dataclass(frozen=True)
class Setting:
    """One run setting, as ``setting()`` declares it and ``table()`` completes it.

    ``flag`` is the ``run`` option (``--time-limit``; ``""``: none, the setting comes from a
    plan file or a scenario); ``section`` and ``key`` its place in a plan file (``section``
    None: not in plan files); ``prop`` the Kafka property it sets, ``role`` on which
    configuration the run sets it as it is (``ROLES``: ``broker``, the default of a
    ``topics`` setting; ``producer``; ``consumer``; None: set with care by the code that
    names it, e.g. a share group's bounds); ``label`` its name in tables and comparison
    cells; ``unit`` of its values (``s``, ``ms``, ``ops/s``); ``aliases`` further names a
    ``--matrix`` key may use; ``fixed`` why a comparison's cells cannot vary it (None: they
    can); ``shown`` whether a configuration's short name (``config.label``) shows it when it
    differs from the default; ``report`` whether the run report's settings table lists it.
    """

    help: str
    section: str | None
    key: str = ""
    flag: str | None = None
    prop: str | None = None
    label: str = ""
    unit: str | None = None
    aliases: tuple[str, ...] = ()
    fixed: str | None = None
    shown: bool = False
    report: bool = False
    role: str | None = None
    #: the ``RunConfig`` field (set by ``table()``)
    field: str = ""

    def names(self) -> set[str]:
        """Every name a ``--matrix`` key may give this setting, normalised as
        ``matrix.field_of`` normalises keys (lower case, ``.`` and ``-`` as ``_``):
        the field, the flag, the Kafka property, the label and the aliases."""
        raw = [self.field, self.flag or "", self.prop or "", self.label, *self.aliases]
        return {n.strip("-").lower().replace("-", "_").replace(".", "_") for n in raw if n}


def setting(default: Any = ..., *, help: str, section: str | None, key: str = "",
            flag: str | None = None, prop: str | None = None, label: str = "",
            unit: str | None = None, aliases: tuple[str, ...] = (), fixed: str | None = None,
            shown: bool = False, report: bool = False, role: str | None = None,
            default_factory: Any = None, **bounds: Any) -> Any:
    """A ``RunConfig`` field: ``pydantic.Field(default, description=help, **bounds)`` that
    also carries its ``Setting`` (see there for the arguments). Raises ``ValueError`` for a
    section that is not one of ``SECTIONS``, a role not one of ``ROLES``, or a role without
    a Kafka property."""
    if section is not None and section not in SECTIONS:
        raise ValueError(f"section {section!r}: choose from {SECTIONS}")
    if role is None and section == "topics" and prop:
        role = "broker"
    if role is not None and (role not in ROLES or not prop):
        raise ValueError(f"role {role!r}: choose from {ROLES}, with a prop")
    if default_factory is not None:
        info = Field(default_factory=default_factory, description=help, **bounds)
    else:
        info = Field(default, description=help, **bounds)
    info.metadata.append(Setting(help, section, key, flag, prop, label, unit, aliases, fixed,
                                 shown, report, role))
    return info


def table(model: Any) -> dict[str, Setting]:
    """Field name -> ``Setting`` of every field of ``model`` (a pydantic model class whose
    fields ``setting()`` declared), in field order, with the defaults filled in: key and
    label the field's name, flag ``--`` + the field's name with ``-`` for ``_``. Raises
    ``TypeError`` naming a field declared otherwise."""
    out = {}
    for name, info in model.model_fields.items():
        found = [m for m in info.metadata if isinstance(m, Setting)]
        if not found:
            raise TypeError(f"{model.__name__}.{name} is not declared with setting()")
        s = found[0]
        out[name] = dataclasses.replace(
            s, field=name, key=s.key or name, label=s.label or name,
            flag="--" + name.replace("_", "-") if s.flag is None else s.flag)
    return out
