"""A run's manners on a cluster it did not create (``Cluster.owned`` false): its own topics,
named after the run, made with the replication and topic configs the verdict judges by and
read back; its own consumer groups and transactional ids; the topics deleted at the end
unless ``--keep-topics``; every refusal (a permission, a replication factor the cluster
cannot honour) one clear error before the workload and any fault.

On a cluster of its own (``owned``), the runner creates its topics here too, with the broker
defaults it set itself.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from kafka_chaos.clusters import admin, wire
from kafka_chaos.clusters.base import Cluster
from kafka_chaos.clusters.errors import ClusterError, Refused
from kafka_chaos.config import RunConfig
from kafka_chaos.waiting import WaitTimeout, wait_until
from kafka_chaos.workloads.drivers import driver_class
from kafka_chaos.workloads.keys import KeySpace
from kafka_chaos.workloads.settings import WorkloadSettings


def describe(cfg: RunConfig, cluster: Cluster) -> dict:
    """What ``run.json`` says of the attached cluster: backend, bootstrap servers, the
    brokers found, the client properties file and its settings with secrets hidden
    (``ClientSecurity.describe``)."""
    security = cluster.security
    return {"backend": cfg.backend, "bootstrap_servers": cluster.bootstrap_servers,
            "brokers": {n.name: n.client_endpoint for n in cluster.brokers},
            "client_properties": cfg.client_properties,
            "security": security.describe() if security else {"security.protocol": "PLAINTEXT"}}


def _serves(cluster: Cluster, feature: str, flag: str, what: str) -> None:
    """Refuse (``Refused``) ``flag`` on a cluster whose brokers do not report ``feature`` at
    level 1 or more among their finalized features (``wire.finalized_features``): ``what``
    (its KIP) is off there, instead of clients that fail their first poll. A broker that
    merely knows the request (Kafka 3.9 lists KIP-848's ConsumerGroupHeartbeat while
    ``group.version`` is 0) is not enough."""
    for node in cluster.brokers:
        level = wire.finalized_features(node.client_endpoint,
                                        security=cluster.security).get(feature, 0)
        if level < 1:
            raise Refused(f"{flag}: broker {node.name} at {node.client_endpoint} reports "
                          f"{feature} {level}: {what} is off there")


def share_group_config(cluster: Cluster, settings: WorkloadSettings) -> dict[str, str]:
    """Set the workload's share group (``settings.share_group``) to what the share checker
    judges by (KIP-932 group configs: ``share.record.lock.duration.ms`` = ``--share-lock-ms``,
    ``share.delivery.count.limit`` = ``--share-delivery-limit``), and to start at the
    earliest offset (a new share group starts at the log end), then read them back. On a
    cluster of the tool's own the brokers already have them; on an attached one the group's
    own values override the cluster's. Returns the configs. Raises ``Refused`` when the
    cluster refuses one (out of its brokers' bounds, ``group.share.min.record.lock.
    duration.ms`` of 15 s by default; no ALTER_CONFIGS on the group) or does not apply it."""
    group = settings.share_group
    want = {"share.auto.offset.reset": "earliest",
            "share.record.lock.duration.ms": str(settings.share_lock_ms),
            "share.delivery.count.limit": str(settings.share_delivery_limit)}
    client = admin.client(cluster.bootstrap_servers, 10.0, cluster.security)
    try:
        admin.set_group_config(client, group, want)
    except ClusterError as exc:
        raise Refused(f"share group {group}: the cluster refused {want}: {exc} (choose "
                      "--share-lock-ms and --share-delivery-limit within its brokers' "
                      "group.share.min/max.* bounds)") from exc

    def applied() -> bool:
        got.update((key, admin.group_config(client, group, key)) for key in want)
        return got == want

    got: dict[str, str | None] = {}
    try:  # a broker answers from its copy of the metadata, which may lag the controller's
        wait_until(applied, 15, 0.5, f"the configs of share group {group}")
    except WaitTimeout:
        raise Refused(f"share group {group}: its configs are {got}, not {want} as set: the "
                      "verdict would judge by a lock or a limit the cluster does not keep"
                      ) from None
    return want


def topic_config(cfg: RunConfig) -> dict[str, str]:
    """The topic configs an attached run sets on its topics: those of the broker defaults a
    cluster of ours would have (``RunConfig.broker_config``) that Kafka also keeps per topic.
    The cluster's own defaults may differ; the verdict judges by these."""
    return {"min.insync.replicas": str(cfg.min_insync_replicas),
            "unclean.leader.election.enable": str(cfg.unclean_leader_election).lower()}


def create_topics(cfg: RunConfig, cluster: Cluster, keys: KeySpace, created: list[str],
                  log: Callable[[str], None], toggles_unclean: bool = False) -> None:
    """Create the topics of ``keys``, appending each name to ``created`` once it exists
    (what ``drop_topics`` removes, also after a failure half-way).

    On an attached cluster: refuses (``Refused``) a replication factor above its broker
    count, ``--group-protocol consumer`` where a broker does not serve KIP-848 and
    ``--sub-via share`` where one does not serve KIP-932; sets
    ``topic_config`` on each topic and reads it back (``DescribeConfigs``), so a
    missing permission or a value the cluster overrides (a create-topic policy) is refused
    here, before the workload; with ``toggles_unclean`` (the toggle among the faults), sets
    the topic's ``unclean.leader.election.enable`` to its own value (``ALTER_CONFIGS``
    refused here, not at the first toggle). ``admin.create_topic`` raises ``Refused`` for a missing
    ``CREATE`` permission."""
    config = None
    if not cluster.owned:
        if cfg.group_protocol == "consumer":
            _serves(cluster, "group.version", "--group-protocol consumer",
                    "the consumer group protocol (KIP-848, Kafka 4.0+)")
        if cfg.sub_via == "share":
            _serves(cluster, "share.version", "--sub-via share",
                    "share groups (KIP-932, Kafka 4.2+)")
        if cfg.replication_factor > len(cluster.brokers):
            raise Refused(f"--replication-factor {cfg.replication_factor}: the cluster at "
                          f"{cluster.bootstrap_servers} has {len(cluster.brokers)} brokers")
        config = topic_config(cfg)
    for topic, partitions in keys.topic_partitions.items():
        admin.create_topic(cluster.bootstrap_servers, topic, partitions, cfg.replication_factor,
                           config=config, security=cluster.security)
        created.append(topic)
    if config is None:
        return
    log(f"created {', '.join(created)} with {config}")
    client = admin.client(cluster.bootstrap_servers, 10.0, cluster.security)
    for topic in created:
        for key, want in config.items():
            got = admin.topic_config(client, topic, key)
            if got != want:
                raise Refused(f"topic {topic}: {key} is {got}, not {want} as created: the "
                              "cluster overrides it (a create-topic policy?), and the verdict "
                              "would judge by a promise the cluster does not make")
    if toggles_unclean:  # the toggle's permission (a fault of the run): a SET, same value
        unclean = "unclean.leader.election.enable"
        admin.set_topic_config(client, keys.base, {unclean: config[unclean]})


def drop_topics(cfg: RunConfig, cluster: Cluster, created: list[str],
                log: Callable[[str], None]) -> dict:
    """Delete the run's topics from an attached cluster unless ``--keep-topics``; never
    raises (the run's end must go on). Returns ``{"created": [...], "deleted": [...],
    "kept": [...], "error": str | None}`` for ``run.json``."""
    out: dict = {"created": list(created), "deleted": [], "kept": [], "error": None}
    if cfg.keep_topics or not created:
        out["kept"] = list(created)
        if created:
            log(f"keeping topics {', '.join(created)} (--keep-topics)")
        return out
    try:
        out["deleted"] = admin.delete_topics(cluster.bootstrap_servers, created,
                                             security=cluster.security)
    except ClusterError as exc:
        out["error"] = str(exc)
        log(f"could not delete the run's topics {', '.join(created)}: {exc}")
    out["kept"] = [t for t in created if t not in out["deleted"]]
    if out["deleted"]:
        log(f"deleted topics {', '.join(out['deleted'])}")
    return out


def drop_groups(cfg: RunConfig, cluster: Cluster, keys: KeySpace,
                settings: WorkloadSettings | None, created: list[str],
                log: Callable[[str], None]) -> dict:
    """Delete the run's consumer and share groups (named ``<keys.base>-...``, as
    ``workload_settings`` named them in ``settings``; None when the run ended before it had
    any) from an attached cluster, unless ``--keep-topics`` keeps them with the topics whose
    offsets they hold; never raises. A group whose dropped
    members' sessions have not ended yet is waited for (``admin.delete_groups``). Returns
    ``{"deleted": [...], "kept": {group: error}, "error": str | None}`` for ``run.json``."""
    out: dict = {"deleted": [], "kept": {}, "error": None}
    if cfg.keep_topics or not created:
        return out
    shares = (settings.share_group,) if settings and settings.sub_via == "share" else ()
    try:
        out["deleted"], out["kept"] = admin.delete_groups(
            cluster.bootstrap_servers, f"{keys.base}-", shares, security=cluster.security)
    except ClusterError as exc:
        out["error"] = str(exc)
        log(f"could not delete the run's groups: {exc}")
    if out["deleted"]:
        log(f"deleted groups {', '.join(out['deleted'])}")
    if out["kept"]:
        log(f"could not delete groups {out['kept']}")
    return out


def workload_settings(cfg: RunConfig, cluster: Cluster, keys: KeySpace) -> WorkloadSettings:
    """The run's workload settings with the cluster's security settings for every client and,
    on an attached cluster, consumer groups and transactional ids named after the run's
    topics (``keys.base``)."""
    settings = WorkloadSettings.from_config(cfg)
    if cluster.security is not None:
        settings = dataclasses.replace(
            settings, **driver_class(settings.client).connection(cluster.security))
    if not cluster.owned:
        settings = dataclasses.replace(settings, ids=keys.base, group=f"{keys.base}-group")
    return settings
