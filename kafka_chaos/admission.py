"""Admission of a run configuration: what the settings model (``kafka_chaos.config``, on the
ground floor) cannot check by itself because it needs another package, a scenario's schedule
file (``nemesis.script``) and what it holds; and what the run then needs, read once: the
scenario's steps, the faults it may start, the packages and targets its nemesis is built for,
the backend's options (``clusters.backends``). ``options.configure`` admits every
configuration it builds, ``orchestrate`` every one it checks or runs, so no run starts
unadmitted, and the runner reads the ``Admitted`` record instead of the files again.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kafka_chaos.catalogue.faults import (OPT_IN_FILES, own_cluster_only, parse_targets,
                                          starts)
from kafka_chaos.clusters import backends
from kafka_chaos.config import ATTACHED, SCENARIOS, RunConfig, version_tuple
from kafka_chaos.nemesis import script

#: The packages a scenario's nemesis is built for: any its steps may ask for (the unclean
#: toggle, the proxy's request faults and the client crash come with every run).
SCRIPTED = ("kill", "stop", "pause", "partition", "clock", "leader", "file", "rollback",
            "membership", "disk")


@dataclasses.dataclass(frozen=True)
class Admitted:
    """A run configuration found possible (``admit``), with what its admission read.

    Attributes:
        cfg: the configuration.
        scenario: its scenario's steps (``--scenario``), or None.
        faults: every nemesis ``f`` the run may start: its packages', or its scenario's.
        packages: the nemesis packages its nemesis is built for (``SCRIPTED`` for a
            scenario); ``targets``: package -> the targets the schedule draws from.
        backend: the options of its cluster backend.
    """

    cfg: RunConfig
    scenario: script.Script | None
    faults: frozenset[str]
    packages: tuple[str, ...]
    targets: dict[str, list]
    backend: backends.BackendOptions

    @property
    def toggles_unclean(self) -> bool:
        """Whether the run may turn unclean leader election on and off (the ``unclean``
        package, or a scenario's step)."""
        return bool(set(starts("unclean")) & self.faults)


def load_scenario(spec: str) -> script.Script:
    """``--scenario``: a built-in scenario's name, or the path of a schedule file (YAML,
    ``nemesis.script``). Raises ``ValueError`` naming the choices, or the file, line and key."""
    if spec in SCENARIOS:
        return script.built_in(spec)
    if not spec.endswith((".yaml", ".yml")) and not Path(spec).exists():
        raise ValueError(f"--scenario {spec!r}: choose from {', '.join(SCENARIOS)}, or give a "
                         "schedule file (.yaml)")
    return script.load(Path(spec))


def admit(cfg: RunConfig) -> Admitted:
    """``cfg`` once what its scenario asks is found possible: the schedule file loads (a
    built-in name, or a file whose first problem is named with its line), its request faults
    have the proxy, and on a cluster the tool did not create it neither needs one of ours
    (libfaketime, the lossy filesystem) nor toggles unclean elections (its steps may change
    cluster-wide configs). Raises ``ValueError`` with one message naming the option."""
    scenario = load_scenario(cfg.scenario) if cfg.scenario is not None else None
    if scenario is None:
        faults = frozenset(f for name in cfg.nemesis for f in starts(name))
    else:
        faults = frozenset(f for step in scenario.steps for f in step.do)
        if "request-fault" in faults and not cfg.proxy:
            raise ValueError(f"--scenario {cfg.scenario}: its request-fault steps happen in "
                             "the Kafka protocol proxy; add --proxy (or proxy: true in its "
                             "settings)")
        if cfg.backend in ATTACHED:
            for name in own_cluster_only(cfg.damage_files):
                if set(starts(name)) & faults:
                    raise ValueError(f"the {name} faults need a cluster of the tool's own, "
                                     f"not --backend {cfg.backend}"
                                     + (" (or --backend ssh-attach with --damage-files)"
                                        if name in OPT_IN_FILES else ""))
            if set(starts("unclean")) & faults:
                raise ValueError(f"--scenario {cfg.scenario} toggles unclean elections: not "
                                 f"on --backend {cfg.backend} (its steps may change "
                                 "cluster-wide configs)")
    if (set(starts("membership")) & faults and cfg.backend not in ATTACHED
            and version_tuple(cfg.kafka_version) < (3, 9)):
        raise ValueError(f"membership faults need Kafka 3.9 or later (KIP-853's dynamic "
                         f"quorum), not --kafka-version {cfg.kafka_version}")
    packages = SCRIPTED if scenario is not None else tuple(cfg.nemesis)
    return Admitted(cfg, scenario, faults, packages,
                    parse_targets(cfg.nemesis_targets, list(packages)),
                    _backend_options(cfg, faults))


def _backend_options(cfg: RunConfig, faults: frozenset[str]) -> backends.BackendOptions:
    """The ``clusters.backends.BackendOptions`` of the run: the cluster settings, and what
    its ``faults`` need of a cluster of its own (the lossy filesystem, libfaketime)."""
    return backends.BackendOptions(
        image=cfg.image, inventory=Path(cfg.inventory) if cfg.inventory else None,
        bootstrap_servers=cfg.bootstrap_servers, compose_project=cfg.compose_project,
        fault_last_broker=cfg.fault_last_broker, damage_files=cfg.damage_files,
        containers=tuple(c.strip() for c in (cfg.containers or "").split(",") if c.strip()),
        client_properties=Path(cfg.client_properties) if cfg.client_properties else None,
        accept_unknown_host_keys=cfg.accept_unknown_host_keys,
        lossy_fs=bool(set(starts("lose-unfsynced") + starts("disk")) & faults),
        clock=bool(set(starts("clock")) & faults),
        dynamic_quorum=bool(set(starts("membership")) & faults))
