"""Admission of a run configuration: what the settings model (``kafka_chaos.config``, on the
ground floor) cannot check by itself because it needs another package: a scenario's schedule
file (``nemesis.script``) and what it holds, the faults a run may start, and the backend's
options (``clusters.backends``). ``options.configure`` admits every configuration it builds
and ``orchestrate.check_inputs`` every one it is given, so no run starts unadmitted.
"""

from __future__ import annotations

from pathlib import Path

from kafka_chaos.catalogue.faults import OWN_CLUSTER_ONLY, starts
from kafka_chaos.clusters import backends
from kafka_chaos.config import ATTACHED, SCENARIOS, RunConfig
from kafka_chaos.nemesis import script


def load_scenario(spec: str) -> script.Script:
    """``--scenario``: a built-in scenario's name, or the path of a schedule file (YAML,
    ``nemesis.script``). Raises ``ValueError`` naming the choices, or the file, line and key."""
    if spec in SCENARIOS:
        return script.built_in(spec)
    if not spec.endswith((".yaml", ".yml")) and not Path(spec).exists():
        raise ValueError(f"--scenario {spec!r}: choose from {', '.join(SCENARIOS)}, or give a "
                         "schedule file (.yaml)")
    return script.load(Path(spec))


def faults(cfg: RunConfig) -> set[str]:
    """Every nemesis ``f`` the run may start: its packages' (``catalogue.faults``), or its
    scenario's steps'. Raises ``ValueError`` as ``load_scenario`` does."""
    if cfg.scenario:
        return {f for step in load_scenario(cfg.scenario).steps for f in step.do}
    return {f for name in cfg.nemesis for f in starts(name)}


def admit(cfg: RunConfig) -> RunConfig:
    """``cfg`` once what its scenario asks is found possible: the schedule file loads (a
    built-in name, or a file whose first problem is named with its line), its request faults
    have the proxy, and on a cluster the tool did not create it neither needs one of ours
    (libfaketime, the lossy filesystem) nor toggles unclean elections (its steps may change
    cluster-wide configs). Raises ``ValueError`` with one message naming the option."""
    if cfg.scenario is None:
        return cfg
    steps = faults(cfg)
    if "request-fault" in steps and not cfg.proxy:
        raise ValueError(f"--scenario {cfg.scenario}: its request-fault steps happen in the "
                         "Kafka protocol proxy; add --proxy (or proxy: true in its settings)")
    if cfg.backend in ATTACHED:
        for name in OWN_CLUSTER_ONLY:
            if set(starts(name)) & steps:
                raise ValueError(f"the {name} faults need a cluster of the tool's own, not "
                                 f"--backend {cfg.backend}")
        if set(starts("unclean")) & steps:
            raise ValueError(f"--scenario {cfg.scenario} toggles unclean elections: not on "
                             f"--backend {cfg.backend} (its steps may change cluster-wide "
                             "configs)")
    return cfg


def backend_options(cfg: RunConfig) -> backends.BackendOptions:
    """The ``clusters.backends.BackendOptions`` of the run: the cluster settings, and what
    its faults need of a cluster of its own (the lossy filesystem, libfaketime)."""
    started = faults(cfg)
    return backends.BackendOptions(
        image=cfg.image, inventory=Path(cfg.inventory) if cfg.inventory else None,
        bootstrap_servers=cfg.bootstrap_servers, compose_project=cfg.compose_project,
        fault_last_broker=cfg.fault_last_broker,
        containers=tuple(c.strip() for c in (cfg.containers or "").split(",") if c.strip()),
        client_properties=Path(cfg.client_properties) if cfg.client_properties else None,
        accept_unknown_host_keys=cfg.accept_unknown_host_keys,
        lossy_fs=bool(set(starts("lose-unfsynced")) & started),
        clock=bool(set(starts("clock")) & started))
