"""From what the user gave (``run`` options, a plan file, a comparison cell) to one
``RunConfig``: the one place where flags, plan values, matrix values and a scenario's own
settings meet, so ``run`` and ``compare`` build a configuration the same way.

Precedence, highest first: a comparison cell's matrix values, flags given on the command
line, the plan file, the scenario's settings, the options' defaults.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Callable, Collection

from pydantic import ValidationError
from rich.markup import escape

from kafka_chaos import plan as plan_file
from kafka_chaos.admission import admit, load_scenario
from kafka_chaos.catalogue.faults import parse_packages
from kafka_chaos.config import PATHS, SCENARIOS, SETTINGS, RunConfig, parse_range
from kafka_chaos.verdict import FAIL_ON

#: ``RunConfig`` fields that ``run`` has no flag for (``settings.Setting.flag`` ""): a
#: plan's (``broker_properties``, ``allow``, ``forbid``) and a scenario's
#: (``scenario_settings``). Every other field is a flag (``option_of``).
NO_FLAG = frozenset(name for name, s in SETTINGS.items() if not s.flag)


def option_of(field: str) -> str:
    """The ``run`` flag of a ``RunConfig`` field (``time_limit_s`` -> ``--time-limit``), or
    the field's name for one without (``broker_properties``)."""
    return SETTINGS[field].flag or field


def fields_of(params: dict[str, Any]) -> dict[str, Any]:
    """``RunConfig`` fields from the ``run`` command's parameters, which are named as the
    fields are: ``nemesis`` (``--nemesis`` text) parsed into packages, ``ops_per_txn`` into a
    range, paths made absolute; None values left out. Raises ``ValueError`` naming the
    option."""
    fields = {k: v for k, v in params.items() if k in RunConfig.model_fields}
    try:
        span = parse_range(params["ops_per_txn"])
    except ValueError as exc:
        raise ValueError(f"--ops-per-txn {exc}") from None
    fields.update({key: params.get(key) and str(Path(params[key]).resolve())
                   for key in PATHS if key != "kafka_home"})
    fields.update({"kafka_home": params.get("kafka_home") and str(params["kafka_home"]),
                   "ops_per_txn": span, "nemesis": parse_packages(params["nemesis"])})
    return {k: v for k, v in fields.items() if v is not None}


def configure(params: dict[str, Any], given: set[str], cell: dict[str, Any] | None = None,
              announce: Callable[[str], None] = lambda text: None) -> tuple[RunConfig, str]:
    """The run configuration and ``--fail-on`` of one run.

    Args:
        params: the ``run`` command's parameters by name (``plan`` among them, or None).
        given: names of the parameters given on the command line (they override the plan).
        cell: ``RunConfig`` fields a comparison cell sets (``kafka_chaos.matrix``); they
            override everything else.
        announce: called with each line the user should read (scenario settings applied or
            kept), in Rich markup.

    Raises ``ValueError`` with one message naming the option, plan key or cell setting.
    """
    fail_on = params.get("fail_on") or "violation"
    given = set(given)
    try:
        fields = fields_of(params)
        if params.get("plan") is not None:  # a plan's values give way to the command line
            path = Path(params["plan"])
            planned = plan_file.run_fields(plan_file.load(path), path)
            if "fail_on" not in given:
                fail_on = planned.get("fail_on", fail_on)
            fields.update({k: v for k, v in planned.items() if k not in given | {"fail_on"}})
            given |= set(planned)
        if fail_on not in FAIL_ON:
            raise ValueError(f"--fail-on {fail_on!r}: choose violation or any")
        fields.update(cell or {})
        given |= set(cell or {})
        if fields.get("scenario") is not None:
            if fields["scenario"] not in SCENARIOS and Path(fields["scenario"]).exists():
                fields["scenario"] = str(Path(fields["scenario"]).resolve())
            fields["scenario_settings"] = scenario_settings(fields, given, announce)
        cfg = RunConfig(**fields)
        admit(cfg)  # refused here, with the option named, when its scenario cannot run
        return cfg, fail_on
    except ValidationError as exc:
        err = exc.errors()[0]
        where = option_of(str(err["loc"][0])) if err["loc"] else ""
        raise ValueError(f"{where} {err['msg'].removeprefix('Value error, ')}".strip()) from None


def scenario_settings(fields: dict[str, Any], given: set[str],
                      announce: Callable[[str], None]) -> dict[str, Any]:
    """Apply the scenario's settings to ``fields`` except those the user gave (command line,
    plan or comparison cell), announcing each; a mapping (``broker_properties``) is merged,
    the user's value winning per key. Returns the settings applied. Raises
    ``ValueError`` for a setting that is no run option."""
    applied = {}
    name = fields["scenario"]
    for field, value in load_scenario(name).settings.items():
        if field not in RunConfig.model_fields or field.startswith("scenario"):
            raise ValueError(f"--scenario {name}: settings.{field} is no run option")
        if field in given and isinstance(value, dict) and isinstance(fields.get(field), dict):
            # properties (broker_properties): the scenario's, and the user's where both set one
            for key in sorted(k for k in value if fields[field].get(k, value[k]) != value[k]):
                announce(f"[yellow]scenario {name}[/]: keeping your {key}={fields[field][key]} "
                         f"(the scenario sets {value[key]}; its preconditions may not happen)")
            value = {**value, **fields[field]}
        elif field in given and fields.get(field) != value:
            announce(f"[yellow]scenario {name}[/]: keeping your "
                     f"{escape(shown(field, fields[field]))} (the scenario sets "
                     f"{escape(shown(field, value))}; its preconditions may not happen)")
            continue
        fields[field] = value
        applied[field] = value
    if applied:
        announce(f"scenario {name} sets "
                 + ", ".join(escape(shown(k, v)) for k, v in applied.items()))
    return applied


def args_of(field: str, value: Any) -> list[str]:
    """The words that give ``RunConfig`` field ``field`` the value ``value`` on a ``run``
    command line: ``["--acks", "all"]``, ``["--time-limit", "60"]``; a bool as
    ``["--idempotence"]`` or ``["--no-idempotence"]``; ``["--ops-per-txn", "1..4"]``;
    ``["--nemesis", "kill,partition"]`` (``none``: no package). A setting without a flag
    (``NO_FLAG``: a plan's or a scenario's) is its name and its value as a plan writes it:
    ``["broker_properties", "producer.id.expiration.ms=10000"]``, ``["forbid",
    "duplicate,lost"]``. The one rendering of a setting for the user: rerun commands,
    what a scenario sets, ``plan check``."""
    flag = option_of(field)
    if isinstance(value, bool):
        return [flag if value else flag.replace("--", "--no-", 1)]
    if field == "ops_per_txn":
        return [flag, f"{value[0]}..{value[1]}"]
    if field == "nemesis":
        return [flag, ",".join(value) or "none"]
    if isinstance(value, dict):  # as a plan's broker_config writes a Kafka property
        return [flag, *(f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                        for k, v in value.items())]
    if isinstance(value, (list, tuple)):
        return [flag, ",".join(map(str, value))]
    if isinstance(value, float):  # 60, not 60.0; repr keeps every digit of 0.1234567
        return [flag, str(int(value)) if value.is_integer() else repr(value)]
    return [flag, str(value)]


def shown(field: str, value: Any) -> str:
    """``args_of`` as one string, quoted as a shell would need it."""
    return shlex.join(args_of(field, value))


def run_args(config: dict[str, Any], planned: Collection[str] = ()) -> list[str]:
    """The ``run`` flags that give ``config`` (a ``RunConfig`` dump): every setting that
    differs from the default, or that ``planned`` names (what a plan sets, which only a flag
    overrides), and the seed; never one the scenario sets itself (``scenario_settings``) nor
    one without a flag (``NO_FLAG``)."""
    defaults = RunConfig().model_dump(mode="json")
    by_scenario = set(config.get("scenario_settings") or {})
    args: list[str] = []
    for field, value in config.items():
        if field in NO_FLAG or field in by_scenario:
            continue
        if value == defaults.get(field) and field != "seed" and field not in planned:
            continue
        args += args_of(field, value)
    return args


def command_of(config: dict[str, Any], plan: str | Path | None = None) -> str:
    """A ``kafka-chaos run`` command line giving ``config`` (a ``RunConfig`` dump): its
    ``run_args``. Plan-only settings (``broker_properties``, ``allow``, ``forbid``) have no
    flag: with ``plan``, the command starts from ``--plan plan`` and also gives every setting
    the plan sets, so the plan's values cannot win over the configuration's; without, they
    are left out."""
    args = ["kafka-chaos", "run"]
    planned: set[str] = set()
    if plan is not None:
        args += ["--plan", str(plan)]
        planned = set(plan_file.run_fields(plan_file.load(Path(plan)), Path(plan)))
    return shlex.join(args + run_args(config, planned))
