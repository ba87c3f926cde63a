"""One chaos run: cluster up -> workload + nemesis -> heal -> final reads -> analysis.

Whatever happens (an error, Ctrl-C), ``run`` heals every fault and tears the cluster down in
its ``finally`` blocks, and the history on disk stays readable for ``kafka-chaos analyze``.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from kafka_chaos.clusters import admin, backends, share_state
from kafka_chaos.clusters.base import Cluster
from kafka_chaos.clusters.dist import KafkaDist
from kafka_chaos.history import HistoryWriter
from kafka_chaos import __version__, attach
from kafka_chaos.admission import Admitted
from kafka_chaos.config import RunConfig
from kafka_chaos.live import LiveCheck
from kafka_chaos.nemesis.clients import ClientNemesis
from kafka_chaos.nemesis.faults import UncleanElectionNemesis
from kafka_chaos.nemesis.monitor import Monitor
from kafka_chaos.nemesis.proxy import KafkaProxy
from kafka_chaos.nemesis.requests import RequestNemesis
from kafka_chaos.nemesis.script import Runner, Script
from kafka_chaos.nemesis.files import FileNemesis
from kafka_chaos.nemesis.schedule import Scheduler, build_nemesis, schedule_rng, unhealed
from kafka_chaos.workloads import share
from kafka_chaos.workloads.final_reads import final_reads
from kafka_chaos.workloads.keys import KeySpace
from kafka_chaos.workloads.queue import QueueWorkload
from kafka_chaos.workloads.settings import WorkloadSettings

#: Topic 0 of every run on a cluster of its own (on an attached cluster, the run's name
#: follows it); faults aimed at "the leader" aim at its partition 0 (key 0).
TOPIC = "kafka-chaos"
#: Below this share of the ``--rate`` asked, the run warns that its rate was not the one asked.
SLOW_RATE = 0.8


def new_run_dir(out: Path) -> Path:
    """Create ``out/<UTC timestamp>/`` (never reusing one) and point ``out/latest`` at it."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    run_dir = out / stamp
    n = 1
    while True:
        try:
            run_dir.mkdir()
            break
        except FileExistsError:
            n += 1
            run_dir = out / f"{stamp}-{n}"
    latest = out / "latest"
    tmp = out / f".latest-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.name)
    tmp.replace(latest)
    return run_dir


def _utc_offset_s() -> int:
    """This machine's zone offset now (s east of UTC): a broker log line without a zone in
    its time was written in it."""
    offset = time.localtime().tm_gmtoff
    return int(offset or 0)


def _log_tail(cluster: Cluster, lines: int = 15) -> str:
    parts = []
    for node in cluster.nodes:
        for path in cluster.log_files(node):
            text = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"--- {node.name}: {path.name} ---\n" + "\n".join(text))
    return "\n".join(parts)


def _halted(cluster: Cluster) -> dict[str, str]:
    """``{node name: the line its log stopped for good with}`` of the nodes whose process
    is not running and whose log says why (``kafka_log.halt_reason``): a broker that cannot
    start, e.g. on a log directory a damaged checkpoint failed."""
    from kafka_chaos.analysis.kafka_log import halt_reason

    out = {}
    for node in cluster.nodes:
        if cluster.is_running(node):
            continue
        for path in cluster.log_files(node):
            why = halt_reason(path.read_text(errors="replace").splitlines())
            if why is not None:
                out[node.name] = why
                break
    return out


def run(admitted: Admitted, kafka: KafkaDist, run_dir: Path, log: Callable[[str], None],
        progress: Callable[[float, dict, str], None] | None = None,
        on_ready: Callable[[], None] | None = None, command: str | None = None,
        fail_on: str = "violation") -> dict:
    """Execute the run of ``admitted`` (its configuration ``cfg`` and what its admission read:
    ``admission.Admitted``) with ``kafka`` in ``run_dir``; return run facts (not the
    verdict). ``on_ready`` is called once the cluster and topics are ready, before the
    workload starts (it must return at once). ``command`` is the command line that reruns it
    (default: this process's own). ``progress(fraction done, op counts, live summary)`` is
    called about every 0.5 s of a time-limited workload.

    With ``cfg.follows_live`` a ``live.LiveCheck`` checks the history while the workload runs
    (``live.jsonl``; facts under ``"live"``); with ``cfg.stop_on_violation`` its first counted
    anomaly ends the workload early (``"stopped_early"``), and the run goes on to heal and
    final reads as after its time limit. ``fail_on`` is what the live check counts.

    Files written: ``config.json``, ``command.txt``, ``history.jsonl``, ``nodes/<name>/`` (broker
    config, data and logs), ``run.json`` (timings and counts). Raises ``ClusterError`` subclasses
    for cluster trouble; faults are healed and the cluster removed in every case. A cluster
    the tool attached to (``Cluster.owned`` false) keeps everything but the run's topics,
    which are deleted unless ``--keep-topics`` (``kafka_chaos.attach``; ``run.json`` has
    ``attached`` and ``topics``).
    """
    cfg = admitted.cfg
    (run_dir / "config.json").write_text(cfg.model_dump_json(indent=2))
    if admitted.scenario is not None:  # the steps as run, whatever happens to the file later
        (run_dir / "scenario.json").write_text(admitted.scenario.model_dump_json(indent=2))
    (run_dir / "command.txt").write_text(
        (command or shlex.join(["kafka-chaos", *sys.argv[1:]])) + "\n")
    facts: dict = {"seed": cfg.seed, "kafka_version": kafka.version,
                   "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    cluster = backends.get(cfg.backend).create(kafka, run_dir / "nodes", cfg.brokers,
                                               cfg.controllers, cfg.broker_config(),
                                               admitted.backend)
    # on a cluster that is not ours, the run's topics, groups and transactional ids carry
    # the run's name: never another run's or application's
    keys = KeySpace(TOPIC if cluster.owned else f"{TOPIC}-{run_dir.name}", cfg.keys,
                    cfg.topics)
    if not cluster.owned:  # no Kafka request tells a broker's version
        facts["kafka_version"] = "unknown (attached)"
    settings: WorkloadSettings | None = None
    rng = random.Random(cfg.seed)
    stop = threading.Event()
    created: list[str] = []
    t0 = time.monotonic()
    try:
        # what the clients run with; from here on their settings are read from it, not cfg
        settings = attach.workload_settings(cfg, cluster, keys)
        if cluster.owned:
            log(f"starting {cfg.brokers} Kafka {kafka.version} brokers"
                + (f" + {cfg.controllers} controllers" if cfg.controllers
                   else " (KRaft combined mode)"))
        else:
            log(f"attaching to {cluster.bootstrap_servers} ({cfg.backend})")
        cluster.setup()
        if not cluster.owned:
            facts["attached"] = attach.describe(cfg, cluster)
        admin.wait_ready(cluster.bootstrap_servers, len(cluster.brokers), [], timeout_s=120,
                         log_tail=lambda: _log_tail(cluster), security=cluster.security)
        attach.create_topics(cfg, cluster, keys, created, log, admitted.toggles_unclean)
        admin.wait_ready(cluster.bootstrap_servers, len(cluster.brokers),
                         list(keys.topic_partitions), timeout_s=60,
                         log_tail=lambda: _log_tail(cluster), security=cluster.security)
        facts["cluster_ready_s"] = round(time.monotonic() - t0, 2)
        log(f"cluster ready in {facts['cluster_ready_s']} s at {cluster.bootstrap_servers}")
        if on_ready:
            on_ready()
        header = {"kafka_chaos": __version__, "kafka_version": facts["kafka_version"],
                  "config": cfg.model_dump(mode="json"), "keys": keys.header(),
                  "nodes": {str(n.node_id): {"name": n.name, "roles": list(n.roles)}
                            for n in cluster.nodes}}
        # the wall time at history time 0: where broker logs share this machine's clock,
        # their lines are evidence on the history's clock (analysis.kafka_log)
        start_ns, unix_ns = time.monotonic_ns(), time.time_ns()
        header["clock"] = {"unix_ns": unix_ns, "utc_offset_s": _utc_offset_s(),
                           "brokers": "host" if cluster.host_clock else "own"}
        with HistoryWriter(run_dir / "history.jsonl", start_ns=start_ns,
                           header=header) as history:
            live = _live_check(cfg, run_dir, fail_on, stop, log, facts)
            facts.update(_run_phases(admitted, cluster, history, keys, settings, rng, stop,
                                     log, progress, live))
    except KeyboardInterrupt:
        stop.set()
        facts["interrupted"] = True
        log("interrupted: healing and tearing down")
        raise
    finally:
        stop.set()
        if not cluster.owned:
            facts["groups"] = attach.drop_groups(cfg, cluster, keys, settings, created, log)
            facts["topics"] = attach.drop_topics(cfg, cluster, created, log)
        cluster.teardown()
        facts["total_s"] = round(time.monotonic() - t0, 2)
        (run_dir / "run.json").write_text(json.dumps(facts, indent=2))
    return facts


def _live_check(cfg: RunConfig, run_dir: Path, fail_on: str, stop: threading.Event, log,
                facts: dict) -> LiveCheck | None:
    if not cfg.follows_live:
        return None

    def stop_early(names: list[str]) -> None:
        facts["stopped_early"] = {"anomalies": names}
        stop.set()  # the workload loop or the scenario returns at its next wait

    return LiveCheck(run_dir / "history.jsonl", run_dir, cfg.spark_master, fail_on,
                     cfg.live_interval_s, cfg.stop_on_violation, on_stop=stop_early, log=log)


def _run_phases(admitted: Admitted, cluster: Cluster, history: HistoryWriter,
                keys: KeySpace, settings: WorkloadSettings, rng: random.Random,
                stop: threading.Event, log, progress, live: LiveCheck | None) -> dict:
    facts: dict = {}
    cfg = admitted.cfg
    packages = list(admitted.packages)
    proxy = _proxy(cluster, history, cfg.seed, log) if cfg.proxy else None
    try:
        extra: list = [UncleanElectionNemesis(cluster, rng, keys.base,
                                              cfg.unclean_leader_election)]
        if proxy is not None:
            extra.append(RequestNemesis(cluster, rng, proxy))
        workload = QueueWorkload(proxy.bootstrap if proxy else cluster.bootstrap_servers,
                                 history, settings, keys, seed=rng.randrange(2**32))
        extra.append(ClientNemesis(cluster, rng, workload.crash_all))
        nemesis = build_nemesis(cluster, packages, rng, extra=tuple(extra))
        monitor = Monitor(cluster, history, list(keys.topic_partitions), share=(
            (settings.share_group, keys.topic_partitions) if settings.sub_via == "share"
            else None))
        scheduler = Scheduler(nemesis, history, [] if cfg.scenario else packages,
                              cfg.nemesis_interval_s, schedule_rng(cfg.seed), keys.base,
                              targets=admitted.targets, log=log,
                              after_op=lambda f: _sample(monitor, f"after {f}", log),
                              before_op=lambda f: _sample(monitor, f"before {f}", log))
        monitor.start()
        try:
            _phases(cfg, cluster, history, keys, stop, log, progress, monitor, scheduler,
                    workload, facts, live, proxy, admitted.scenario)
            facts["client"] = workload.client_info()
        finally:
            # before the history closes: no sample may be left open in it
            monitor.stop()
            facts["monitor_samples"] = monitor.samples
            damaged = [d for n in nemesis.nemeses if isinstance(n, FileNemesis)
                       for d in n.damaged]
            if damaged:  # the verdict cannot judge what follows them yet (verdict.judge_run)
                facts["file_damage"] = damaged
    finally:
        if proxy is not None:
            proxy.stop()
            facts["proxy"] = proxy.counts()
    return facts


def _proxy(cluster: Cluster, history: HistoryWriter, seed: int, log) -> KafkaProxy:
    """The started Kafka protocol proxy in front of ``cluster``'s brokers (``--proxy``): the
    workload's clients reach the brokers through it; the monitor and the final reads do not.
    Its request faults are timed on ``history``'s clock. Raises ``ProxyError``."""
    proxy = KafkaProxy.for_cluster(cluster, clock=history.now_ns, seed=seed)
    proxy.start()
    log(f"Kafka proxy listening at {proxy.bootstrap}")
    return proxy


def _phases(cfg: RunConfig, cluster: Cluster, history: HistoryWriter, keys: KeySpace,
            stop: threading.Event, log, progress, monitor: Monitor, scheduler: Scheduler,
            workload: QueueWorkload, facts: dict, live: LiveCheck | None,
            proxy: KafkaProxy | None = None, scenario: Script | None = None) -> None:
    s = workload.s  # the clients' and their groups' settings
    if s.sub_via == "share":
        facts["share_group_config"] = attach.share_group_config(cluster, s)
    # the workload's group ops would otherwise spend a fresh cluster's first seconds on
    # NOT_COORDINATOR while __consumer_offsets is created: a run shorter by that much
    group = s.share_group if s.sub_via == "share" else s.group
    facts["group_coordinator_s"] = round(admin.wait_group_coordinator(
        cluster.bootstrap_servers, group, next(iter(keys.topic_partitions)),
        security=cluster.security), 2)
    # the time limit is the workload's: a slow coordinator (7.7 s seen in CI) must not eat
    # into the faults it has room for
    start = time.monotonic()
    try:
        if cfg.proxy_fault:  # before the first request, ended by the final heal
            scheduler.run_op("request-fault", {"target": cfg.proxy_fault})
        workload.start()
        scheduler.start()
        if live:
            live.start()
        if scenario is not None:
            log(f"scenario {scenario.name}: {scenario.about}")
            facts["scenario"] = Runner(cluster, scheduler.run_op, monitor, keys.base, stop,
                                       log).run(scenario)
        else:
            while not stop.wait(0.5):
                elapsed = time.monotonic() - start
                if progress:
                    progress(min(elapsed / cfg.time_limit_s, 1.0), dict(workload.counts),
                             live.summary() if live else "")
                if elapsed >= cfg.time_limit_s:
                    break
    finally:
        if live:  # before the heal: the final analysis, not a prefix's, judges what follows
            facts["live"] = live.close()
        log("healing all faults")
        facts["healed"] = scheduler.finish()
        if not cfg.scenario:  # a scenario's steps say themselves what they did
            facts["faults_not_run"] = scheduler.not_run()
        facts["heal_left"] = unhealed(cluster, facts["healed"], proxy)
        if facts["heal_left"]:
            log(f"the heal did not complete: {'; '.join(facts['heal_left'])}")
        workload.stop()
    facts["workload_s"] = round(time.monotonic() - start, 2)
    facts["ops"] = dict(workload.counts)
    secs = max(facts["workload_s"], 1e-9)
    facts["ops_per_s"] = round((sum(workload.counts.values()) - workload.counts["acked"]) / secs, 1)
    facts["acked_sends_per_s"] = round(workload.counts["acked"] / secs, 1)
    counts = workload.counts
    log(f"workload done: {counts['ok'] + counts['fail'] + counts['info']:,} ops "
        f"({counts['ok']:,} ok, {counts['fail']:,} fail, {counts['info']:,} info), "
        f"{counts['acked']:,} sends acknowledged; {facts['ops_per_s']} ops/s, "
        f"{facts['acked_sends_per_s']} acknowledged sends/s; waiting for full ISRs")
    if facts["ops_per_s"] < SLOW_RATE * cfg.rate:
        # a comparison of cells that ran at different rates compares the rates too
        log(f"warning: the workload ran {facts['ops_per_s']} ops/s, "
            f"{100 * facts['ops_per_s'] / cfg.rate:.0f} % of the --rate {cfg.rate:g} asked: "
            f"each of the {cfg.clients} client processes waits for its op to complete "
            "before the next (faults and acks=all make ops slow); more --clients or a lower "
            "--rate make the rate the one asked")
    try:
        waited = admin.wait_ready(
            cluster.bootstrap_servers, len(cluster.brokers), list(keys.topic_partitions),
            timeout_s=90, security=cluster.security,
            # a broker that stopped for good never comes back: no use waiting the 90 s out
            gone=lambda: "; ".join(f"{n} stopped for good" for n in _halted(cluster)) or None)
        facts["recovery_s"] = round(waited, 2)
    except Exception as exc:  # final reads are still tried; the verdict may become unknown
        facts["recovery_error"] = str(exc)
        facts["halted"] = _halted(cluster)
        log(f"cluster did not fully recover: {exc}")
        for name, why in facts["halted"].items():
            log(f"{name} stopped for good: {why}")
    if s.sub_via == "subscribe":  # asked of a recovered cluster: a coordinator may be loading
        facts["group"] = _group_protocol(cluster, s, log)
    log("final reads: every partition read to its end")
    facts["final_reads"] = final_reads(cluster.bootstrap_servers, history, keys,
                                       new_process=workload.next_process,
                                       isolation_level=s.isolation_level,
                                       connection=s.connection, ids=s.ids,
                                       check_crcs=s.check_crcs)
    if s.sub_via == "share":
        facts["share"] = _drain(cluster, history, keys, workload, monitor, log)
    # the record must see the partitions up to the end of the final reads: an election
    # between the last periodic sample and a final read would otherwise go unseen, and the
    # analysis would call that stretch blind (analysis.evidence)
    _sample(monitor, "after final reads", log)


def _drain(cluster: Cluster, history: HistoryWriter, keys: KeySpace,
           workload: QueueWorkload, monitor: Monitor, log: Callable[[str], None]) -> dict:
    """The share group's final drain (``workloads.share.drain``): ``{"group", "drain": ok |
    info, "s"}`` with the share-partitions' state (``_share_offsets``) ``before`` and
    ``after`` it."""
    t = time.monotonic()
    group = workload.s.share_group
    before = _share_offsets(cluster, group, keys)
    log(f"draining share group {group}")
    try:
        result = share.drain(cluster.bootstrap_servers, history, keys, group,
                             workload.next_process(), workload.s.share_lock_ms,
                             workload.s.connection,
                             members=lambda: share_state.members(
                                 cluster.bootstrap_servers, group, security=cluster.security))
    except Exception as exc:  # the checker then judges no unsettled record
        result = f"info: {type(exc).__name__}: {exc}"[:200]
    after = _share_offsets(cluster, group, keys)
    return {"group": group, "drain": result, "s": round(time.monotonic() - t, 2),
            "before": before, "after": after,
            "persisted": _share_log(monitor, cluster, keys, group, workload.s.connection)}


def _share_log(monitor: Monitor, cluster: Cluster, keys: KeySpace, group: str,
               connection: dict[str, str]) -> str:
    """Record what the share coordinator persisted (``clusters.share_state.persisted``) as a
    monitor op ``share-state``: ``{"group", "archived": {key: [[first, last, delivery
    count], ...]}}``, the batches it archived, by which the checker knows a record archived
    at its delivery limit whose last delivery no op returned. Returns ``ok``, or ``info:``
    and why (the op is then ``info``: such records stay unjudged)."""
    def observe() -> dict:
        ids = admin.topic_ids(admin.client(cluster.bootstrap_servers, security=cluster.security),
                              list(keys.topic_partitions))
        archived: dict[str, list[list[int]]] = {}
        found = share_state.persisted(cluster.bootstrap_servers, group, connection)
        for (tid, partition), batches in sorted(found.items()):
            try:
                key = str(keys.key(ids[tid], partition))
            except KeyError:  # another topic's share-partition
                continue
            archived.setdefault(key, []).extend(
                [first, last, count] for first, last, state, count in batches
                if state == share_state.ARCHIVED)
        return {"group": group, "archived": archived}

    try:
        monitor.record("share-state", {"group": group}, observe)
    except Exception as exc:  # recorded: the checker then takes no record as archived unseen
        return f"info: {type(exc).__name__}: {exc}"[:200]
    return "ok"


def _share_offsets(cluster: Cluster, group: str, keys: KeySpace) -> dict | str:
    """``{key: {"start_offset", "lag", ...}}`` of the share group's share-partitions
    (``clusters.share_state``), or why the coordinator did not say."""
    topics = {t: list(range(n)) for t, n in keys.topic_partitions.items()}
    try:
        found = share_state.start_offsets(cluster.bootstrap_servers, group, topics,
                                          security=cluster.security)
    except Exception as exc:  # recorded; the verdict then says the state is unknown
        return f"{type(exc).__name__}: {exc}"[:200]
    return {str(keys.key(t, p)): state for (t, p), state in sorted(found.items())}


def _group_protocol(cluster: Cluster, settings: WorkloadSettings,
                    log: Callable[[str], None]) -> dict:
    """``{"asked": --group-protocol, "type": the protocol the coordinator says the group ran}``
    (``unknown: ...`` when it did not answer) of the workload's consumer group: the proof
    that a KIP-848 run was one."""
    group = settings.group
    try:
        found = admin.group_type(cluster.bootstrap_servers, group, security=cluster.security)
    except Exception as exc:  # the verdict then says the precondition is unproven
        found = f"unknown: {exc}"[:200]
    log(f"consumer group {group}: {found} protocol (asked: {settings.group_protocol})")
    return {"asked": settings.group_protocol, "type": found}


def _sample(monitor: Monitor, trigger: str, log: Callable[[str], None]) -> None:
    # a sample that fails is recorded as an info op; the fault sequence goes on
    try:
        monitor.sample(trigger)
    except Exception as exc:
        log(f"monitor sample failed: {type(exc).__name__}: {exc}")
