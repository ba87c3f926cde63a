"""The ground floor and its catalogues (``kafka_chaos/catalogue/``, ``config``, ``settings``,
``verdict``, ``steady``, ``errors``): they import nothing of the project above them and
nothing heavy, and every record of a catalogue is wired where the rest of the house reads
it."""

from __future__ import annotations

import random

from kafka_chaos.catalogue import anomalies, backends, clients, faults
from tests.unit.test_architecture import import_graph
from tests.unit.test_import_cost import loaded_by

#: The ground floor's modules: these and every catalogue.
FLOOR = ("kafka_chaos", "kafka_chaos.errors", "kafka_chaos.settings", "kafka_chaos.config",
         "kafka_chaos.verdict", "kafka_chaos.steady",
         *sorted(m for m in import_graph() if m.startswith("kafka_chaos.catalogue")))


def test_the_ground_floor_imports_nothing_above_it():
    graph = import_graph()
    up = sorted((a, b) for a in FLOOR for b in graph.successors(a) if b not in FLOOR)
    assert up == []
    # and the packages above read the settings model from below, none the other way
    for package in ("clusters", "nemesis", "workloads", "history", "analysis"):
        assert not any(b.startswith(f"kafka_chaos.{package}") for a in FLOOR
                       for b in graph.successors(a)), package


def test_importing_the_ground_floor_loads_nothing_heavy():
    watched = ("pyspark", "confluent_kafka", "networkx", "kio", "docker", "paramiko",
               *(f"kafka_chaos.{p}" for p in ("clusters", "nemesis", "workloads", "history",
                                             "analysis")))
    assert loaded_by(f"import {', '.join(FLOOR)}", watched) == []


def test_every_fault_kind_is_performed_scheduled_and_scripted():
    """A package's start and stop ``f`` are each some nemesis's (``fs``), the schedule's
    nemesis is built for it (or the runner adds it: the unclean toggle, the proxy's request
    faults), a scenario step may name them, and the report has its colour."""
    from kafka_chaos.nemesis import script
    from kafka_chaos.nemesis.base import Nemesis
    from kafka_chaos.nemesis.faults import UncleanElectionNemesis
    from kafka_chaos.nemesis.requests import RequestNemesis
    from kafka_chaos.nemesis.schedule import PERFORMED_BY, build_nemesis, plan

    added_by_runner = {"unclean": UncleanElectionNemesis, "request": RequestNemesis}
    assert sorted([*PERFORMED_BY, *added_by_runner]) == sorted(faults.PACKAGES)
    scripted = script._TARGETED | script._TOPIC_ONLY | script._NO_VALUE | script._REQUEST
    assert len(faults.PACKAGES) >= 11
    for name, kind in faults.PACKAGES.items():
        fs = ({*added_by_runner[name].fs} if name in added_by_runner else
              {f for part in build_nemesis(object(), [name], random.Random(1)).nemeses
               for f in part.fs})
        assert set(kind.start) | {kind.stop} <= fs, name
        assert set(kind.start) | {kind.stop} <= scripted, name
        assert kind.color.startswith("#") and len(kind.color) == 7, name
        assert set(kind.targets) <= set(kind.accepts) and kind.targets, name
        drawn = plan(random.Random(2), [name], faults.parse_targets("", [name]), "t")
        start, value = next(drawn)
        assert start in kind.start and value["target"] in kind.targets, name
        assert next(drawn)[0] == kind.stop, name
    every = {f for cls in _subclasses(Nemesis) for f in cls.fs}
    assert set(faults.STOP_OF) | set(faults.STOP_OF.values()) <= every
    assert faults.OWN_CLUSTER_ONLY and set(faults.OWN_CLUSTER_ONLY) <= set(faults.PACKAGES)


def _subclasses(cls: type) -> set[type]:
    out = set()
    for sub in cls.__subclasses__():
        out |= {sub} | _subclasses(sub)
    return out


def test_the_request_kinds_are_the_proxys_and_the_scenarios_are_the_shipped_files():
    from kafka_chaos import config
    from kafka_chaos.nemesis import script
    from kafka_chaos.nemesis.requests import DEFAULTS

    assert tuple(DEFAULTS) == faults.REQUEST_KINDS
    assert list(config.SCENARIOS) == script.names() and len(config.SCENARIOS) >= 5


def test_the_backend_names_are_the_registrys():
    from kafka_chaos.clusters import backends as registry

    assert set(registry._BACKENDS) == set(backends.NAMES)
    assert backends.NAMES[0] == "local"  # the embedded default first
    assert registry.NAMES == backends.NAMES


def test_the_client_names_are_the_drivers_and_the_settings():
    import typing

    from kafka_chaos.config import RunConfig
    from kafka_chaos.workloads import base, drivers

    assert tuple(drivers._DRIVERS) == clients.NAMES and clients.NAMES[0] == "librdkafka"
    assert typing.get_args(RunConfig.model_fields["client"].annotation) == clients.NAMES
    for name in clients.NAMES:
        driver = drivers.driver_class(name)
        assert issubclass(driver, base.Driver) and driver.open is not base.Driver.open


def test_no_client_is_named_outside_its_driver():
    """The workload, the runner and the attach step name no client library: what differs
    between them is a driver's (``workloads/drivers.py``) or a record of the catalogue."""
    import re

    from tests.unit.test_architecture import _modules

    named = re.compile(r"""["'](java|librdkafka)["']""")
    allowed = {"kafka_chaos.catalogue.clients", "kafka_chaos.workloads.drivers",
               "kafka_chaos.workloads.java_client", "kafka_chaos.workloads.librdkafka",
               "kafka_chaos.workloads.pyclients",  # the librdkafka driver's releases
               "kafka_chaos.config"}  # config: the --client setting's choices
    found = sorted(m for m, path in _modules().items()
                   if m not in allowed and m.startswith(("kafka_chaos.workloads",
                                                         "kafka_chaos.attach",
                                                         "kafka_chaos.runner"))
                   and named.search(path.read_text()))
    assert found == []


def test_every_anomaly_is_found_explained_judged_and_reported():
    """A checker (``analysis.checkers.CHECKERS``), Elle's cycle search (``elle.ANOMALY_SPECS``),
    the liveness check (the hanging transaction) or the quorum checks (``analysis.quorum``)
    finds each name; ``explain`` has its
    sentence (a cycle's example carries its own); every name a promise rule may permit is one
    of the catalogue's; the JUnit report gives each one property."""
    from kafka_chaos.analysis import explain, promises, quorum
    from kafka_chaos.analysis.checkers import CHECKERS
    from kafka_chaos.analysis.elle import ANOMALY_SPECS

    assert len(anomalies.CATALOGUE) == len(set(anomalies.ANOMALIES)) >= 30
    sentences = set(anomalies.ANOMALIES) - set(anomalies.CYCLE_ANOMALIES)
    assert set(explain._RENDER) >= sentences, sentences - set(explain._RENDER)
    permitted = {n for rule in promises.RULES for n in rule.anomalies}
    assert permitted <= set(anomalies.ANOMALIES) and len(permitted) >= 10

    listed = [n for names in anomalies.PROPERTIES.values() for n in names]
    assert sorted(listed) == sorted(anomalies.ANOMALIES)
    found = {n for key in CHECKERS for n in key.split("+")} | set(ANOMALY_SPECS) \
        | {anomalies.HANGING_TXN} | set(quorum.NAMES)
    assert set(anomalies.ANOMALIES) <= found, set(anomalies.ANOMALIES) - found


def _another(name: str):
    """A value of run setting ``name`` other than its default."""
    import typing

    from kafka_chaos.config import RunConfig

    info = RunConfig.model_fields[name]
    if typing.get_origin(info.annotation) is typing.Literal:
        return next(c for c in typing.get_args(info.annotation) if c != info.default)
    if info.default is None or isinstance(info.default, bool):
        return not info.default
    return info.default - 1 if info.default else 1


def test_every_setting_with_a_role_reaches_its_kafka_configuration():
    """A setting whose ``role`` is broker, producer or consumer is set under its Kafka
    property on that configuration, by every client: changing it changes the property."""
    from kafka_chaos.config import SETTINGS, RunConfig
    from kafka_chaos.settings import ROLES
    from kafka_chaos.workloads.settings import WorkloadSettings

    roles = {name: s.role for name, s in SETTINGS.items() if s.role}
    assert set(roles.values()) == set(ROLES)
    for name, role in roles.items():
        value = _another(name)
        cfg = RunConfig(**{name: value})
        prop = SETTINGS[name].prop
        if role == "broker":
            assert cfg.broker_config()[prop] == str(value).lower(), name
            continue
        w = WorkloadSettings.from_config(cfg)
        made = ([w.producer_config("b:9092"), w.java_producer_config("b:9092")]
                if role == "producer" else
                [w.consumer_config("b:9092", "g"), w.java_consumer_config("b:9092")])
        for conf in made:
            assert conf[prop] == value, (name, conf[prop])


def test_what_an_anomaly_needs_is_a_client_op_with_a_reason():
    """``Anomaly.needs`` names client ops the history holds (``history.validate``) and each
    has the sentence the reports say when it never ran."""
    from kafka_chaos.history import validate

    needed = {f for a in anomalies.CATALOGUE for f in a.needs}
    assert needed == set(anomalies.NEEDED) == {"txn", "subscribe", "share"}
    assert needed <= {*validate.MOP_FS, "assign", "subscribe", "share"}
    # every family the run's options can leave out has its anomalies marked
    for prop in ("consumer delivery", "share delivery", "liveness"):
        assert all(a.needs for a in anomalies.CATALOGUE if a.breaks == prop), prop


def test_a_nemesis_op_is_described_with_its_shape_and_what_it_did():
    """The run's log and the report name a fault one way: its f, the shape it was aimed at,
    and its result as words, never a dict or JSON (an 80-column CI log reads it)."""
    assert faults.describe("partition", {"target": "leader-replication"},
                           {"isolated": [["n1"], ["n2", "n3"]], "port": 9092}) == \
        "partition leader-replication: isolated [n1] | [n2, n3]; port 9092"
    lost = faults.describe("lose-unfsynced", {"target": "lone-leader"},
                           {"lost": {"n1": {"truncated_files": 4}}})
    assert lost == "lose-unfsynced lone-leader: lost (n1 (truncated_files 4))"
    assert faults.describe("heal", None, {"healed": True}) == "heal: healed true"
    assert faults.describe("kill", {"target": "one"}, None, "NemesisError: no node") == \
        "kill one: NemesisError: no node"
    cut = faults.describe("request-fault", {"target": "hold"}, {"held": list(range(100))},
                          limit=40)
    assert len(cut) <= len("request-fault hold: ") + 40 and cut.endswith("…")
