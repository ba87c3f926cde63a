"""The verdict as JUnit XML (``junit.xml``), for CI systems that read test reports.

One ``<testsuite name="kafka-chaos">`` holding one ``<testcase>`` per run, named from the run's
configuration (workload, faults, fingerprint; never the seed). The test case mirrors the exit
code (``verdict.exit_code``):

- exit 0: the test case passes; permitted anomalies found are listed in its ``system-out``;
- exit 1: a ``<failure>`` whose message lists the anomalies counted under ``--fail-on``
  with their counts, and whose body explains the first examples of each (``analysis.explain``);
- exit 2: an ``<error>`` whose message is the ``unknown_reasons``.

The suite's ``<properties>`` carry the facts that decide what the run may show: seed, Kafka
version, backend, acks, min.insync.replicas, idempotence, transactions, unclean leader
election, nemesis or scenario, and ``fail_on``.

Results are data first; this module only renders them (``docs/report.md``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from junitparser import Error, Failure, JUnitXml, TestCase, TestSuite

from kafka_chaos.analysis.explain import explain_judged
from kafka_chaos.config import fingerprint
from kafka_chaos.verdict import EXIT_ANOMALIES, EXIT_UNKNOWN, exit_code

SUITE = "kafka-chaos"
#: Examples explained per anomaly in a failure's body (results keep at most 5).
EXAMPLES_PER_ANOMALY = 5


def case_name(results: dict[str, Any], config: dict[str, Any] | None) -> str:
    """The test case's name: workload, faults and the configuration's fingerprint
    (``config.fingerprint``), e.g. ``"queue nemesis=kill,partition config=1a2b3c4d"``. No seed:
    a nightly job with a new seed each night stays one test, so CI systems can follow its
    history and flakiness (the seed is a property)."""
    config = config or {}
    workload = "queue-txn" if config.get("txn") else "queue"
    if config.get("scenario"):
        faults = f"scenario={Path(str(config['scenario'])).stem}"
    else:
        faults = f"nemesis={','.join(config.get('nemesis') or []) or 'none'}"
    return f"{workload} {faults} config={fingerprint(config) if config else 'unknown'}"


def properties(results: dict[str, Any], config: dict[str, Any] | None) -> dict[str, str]:
    """The suite's properties as ``name -> text`` (absent facts are left out)."""
    config = config or {}
    facts = results.get("run") or {}
    props: dict[str, Any] = {
        "seed": _seed(results, config),
        "kafka_version": facts.get("kafka_version") or config.get("kafka_version"),
        "backend": config.get("backend"),
        "acks": config.get("acks"),
        "min.insync.replicas": config.get("min_insync_replicas"),
        "replication_factor": config.get("replication_factor"),
        "enable.idempotence": config.get("idempotence"),
        "transactional": config.get("txn"),
        "isolation.level": config.get("isolation_level"),
        "unclean.leader.election.enable": config.get("unclean_leader_election"),
        # the unclean package turns it on at runtime, whatever the configuration says
        "unclean_election_at_runtime": "unclean" in (config.get("nemesis") or []) or None,
        "nemesis": ",".join(config.get("nemesis") or []) or None,
        "scenario": config.get("scenario"),
        "fail_on": results.get("fail_on") or "violation",
        "valid": results.get("valid"),
    }
    return {name: _text(value) for name, value in props.items() if value is not None}


def build(results: dict[str, Any], config: dict[str, Any] | None) -> JUnitXml:
    """The JUnit document of one verdict.

    Args:
        results: the content of ``results.json`` (``analysis.check``'s dict plus ``fail_on``
            and the run facts under ``run``).
        config: the run configuration (``config.json`` or the history header's), or None
            when unknown (format-1 histories without ``config.json``).
    """
    return document([suite(SUITE, properties(results, config),
                           [testcase(results, config)])])


def testcase(results: dict[str, Any], config: dict[str, Any] | None,
             name: str | None = None) -> TestCase:
    """The test case of one verdict (named ``case_name`` unless ``name`` is given): passed,
    a ``<failure>`` or an ``<error>`` as its exit code says (see the module's docstring)."""
    fail_on = results.get("fail_on") or "violation"
    case = TestCase(name or case_name(results, config), classname=SUITE,
                    time=_duration_s(results))
    code = exit_code(results, fail_on)
    if code == EXIT_ANOMALIES:
        names = _counted(results, fail_on) or list(results.get("anomaly_types") or [])
        failure = Failure(_summary(results, names),
                          "violation" if results.get("violations") else "anomaly")
        failure.text = _explanations(results, names)
        case.result = [failure]
    elif code == EXIT_UNKNOWN:
        reasons = results.get("unknown_reasons") or ["no verdict"]
        error = Error("; ".join(reasons), "unknown")
        error.text = "\n".join(reasons)
        case.result = [error]
    if results.get("permitted"):
        case.system_out = ("permitted anomalies (the configuration allows them):\n"
                           + _explanations(results, results["permitted"]))
    return case


def suite(name: str, props: dict[str, str], cases: list[TestCase]) -> TestSuite:
    """A ``<testsuite>`` with ``props`` as its properties and ``cases``."""
    out = TestSuite(name)
    for key, value in props.items():
        out.add_property(key, value)
    for case in cases:
        out.add_testcase(case)
    out.update_statistics()
    return out


def document(suites: list[TestSuite]) -> JUnitXml:
    """A ``<testsuites>`` document of ``suites``."""
    xml = JUnitXml()
    for s in suites:
        xml.add_testsuite(s)
    xml.update_statistics()
    return xml


def write(run_dir: Path, results: dict[str, Any], config: dict[str, Any] | None) -> Path:
    """Write ``run_dir/junit.xml`` (atomically) for ``results`` and return its path."""
    path = Path(run_dir) / "junit.xml"
    tmp = path.with_suffix(".xml.tmp")
    build(results, config).write(str(tmp), pretty=True)
    tmp.replace(path)
    return path


def _counted(results: dict[str, Any], fail_on: str) -> list[str]:
    """The anomalies that made the exit code 1: violations, or every one found under any."""
    if fail_on == "any":
        return list(results.get("anomaly_types") or [])
    return list(results.get("violations") or [])


def _summary(results: dict[str, Any], names: list[str]) -> str:
    anomalies = results.get("anomalies") or {}
    parts = []
    for name in names:
        found = anomalies.get(name) or {}
        outcomes = found.get("outcomes") or {}
        if found.get("permitted"):
            how = f", permitted by {found['rule']}"
        elif outcomes.get("permitted") or outcomes.get("unexplained"):
            how = "".join(f", {outcomes[o]} {o}" for o in ("violation", "unexplained",
                                                           "permitted") if outcomes.get(o))
        else:
            how = ""
        parts.append(f"{name} ({found.get('count')}{how})")
    kind = "violations" if not any((anomalies.get(n) or {}).get("permitted") for n in names) \
        else "anomalies"
    return f"{kind}: {', '.join(parts)}"


def _explanations(results: dict[str, Any], names: list[str]) -> str:
    anomalies = results.get("anomalies") or {}
    lines = []
    for name in names:
        found = anomalies.get(name) or {}
        head = f"{name}: {found.get('count')} found"
        if found.get("because"):
            head += f"; {found['because']}"
        lines.append(head)
        for example in (found.get("examples") or [])[:EXAMPLES_PER_ANOMALY]:
            lines.append(f"  - {explain_judged(name, example)}")
    return "\n".join(lines)


def _seed(results: dict[str, Any], config: dict[str, Any]) -> Any:
    seed = (results.get("run") or {}).get("seed")
    return config.get("seed") if seed is None else seed


def _duration_s(results: dict[str, Any]) -> float:
    """Seconds the run took (cluster, workload and teardown) plus the analysis."""
    total = (results.get("run") or {}).get("total_s") or 0
    return round(float(total) + float(results.get("analysis_time_s") or 0), 3)


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
