"""The verdict as JUnit XML (``junit.xml``), for CI systems that read test reports.

One ``<testsuite>`` per run, named from the run's configuration (``kafka-chaos`` + workload,
faults, fingerprint; never the seed), so a nightly job with a new seed each night stays one
suite of the same tests. Its test cases:

- one per property the checkers check (``catalogue.anomalies.PROPERTIES``: lost writes,
  duplicates, log integrity, ordering, transactions, cycles, consumer delivery, share
  delivery, metadata, liveness): a ``<failure>`` when anomalies that break it are counted under
  ``--fail-on`` (its message lists them with their counts, its body explains the first
  examples, ``analysis.explain``); else ``<skipped>`` when none of its anomalies had anything
  to check in the run (``RunVerdict.not_applicable``: consumer delivery without a consumer
  group, ...); else an ``<error type="unknown">`` when one of the ``unknown_reasons``
  concerns it (a reason naming none of the anomalies concerns every property: a crashed
  run's); else it passes, its permitted anomalies listed in ``system-out``;
- one per fault asked for (``fault kill``): passes when it ran, ``<skipped>`` when it never
  did (the run did not test it; ``faults_not_run``);
- ``scenario preconditions`` (with a scenario): an ``<error>`` naming the step whose
  precondition was not met; ``final heal``: an ``<error>`` when the heal did not complete;
- ``steady state`` (with a limit, ``--max-unavailable`` or ``--max-recovery``): a
  ``<failure type="steady-state">`` naming each limit broken, an ``<error>`` when the limits
  could not be judged (``kafka_chaos.steady``).

So the suite has a failure exactly when the exit code is 1 (``RunVerdict.exit_code``), and
an error when the verdict is unknown (exit 2) or a property could not be decided. The suite's
``<properties>`` carry the facts that decide what the run may show: seed, Kafka version,
backend, client, acks, min.insync.replicas, idempotence, transactions, unclean leader
election, nemesis or scenario, ``fail_on``, ``valid``, the ``verdict`` word, the
availability (``verdict.AVAILABILITY``) and the steady-state limits.

The verdict (``verdict.RunVerdict``) is built before; this module only renders it
(``docs/report.md``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite

from kafka_chaos.analysis.explain import explain_judged
from kafka_chaos.catalogue.anomalies import ANOMALIES, PROPERTIES
from kafka_chaos.config import fingerprint
from kafka_chaos.steady import UNJUDGED
from kafka_chaos.verdict import AVAILABILITY, EXIT_ANOMALIES, EXIT_UNKNOWN, RunVerdict

SUITE = "kafka-chaos"
#: Examples explained per anomaly in a failure's body (results keep at most 5).
EXAMPLES_PER_ANOMALY = 5


def case_name(results: RunVerdict | None, config: dict[str, Any] | None) -> str:
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


def properties(results: RunVerdict | None, config: dict[str, Any] | None) -> dict[str, str]:
    """The suite's properties as ``name -> text`` (absent facts are left out)."""
    config = config or {}
    facts = results.run if results is not None else {}
    shown = results.availability_shown() if results is not None else {}
    limits = results.steady_state if results is not None else {}
    props: dict[str, Any] = {
        "seed": _seed(results, config),
        "kafka_version": facts.get("kafka_version") or config.get("kafka_version"),
        "backend": config.get("backend"),
        "client": " ".join(filter(None, ((facts.get("client") or {}).get(k) for k in (
            "name", "version")))) or config.get("client"),
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
        "fail_on": results.fail_on if results is not None else "violation",
        "valid": results.valid if results is not None else None,
        "verdict": results.verdict if results is not None else "unknown",
        # the availability as every view shows it; a figure without a value is left out
        **{k: v or None for k, v in shown.items() if k in AVAILABILITY},
        **{k: limits.get(k) for k in ("max_unavailable", "max_recovery_s")},
    }
    return {name: _text(value) for name, value in props.items() if value is not None}


def build(results: RunVerdict, config: dict[str, Any] | None) -> JUnitXml:
    """The JUnit document of one verdict: one suite, a test case per checked property, per
    fault asked for, for the scenario's preconditions and the final heal (see the module's
    docstring).

    Args:
        results: the verdict (``results.json``'s content).
        config: the run configuration (``config.json`` or the history header's), or None
            when unknown (format-1 histories without ``config.json``).
    """
    name = f"{SUITE} {case_name(results, config)}"
    out = suite(name, properties(results, config), property_cases(results, name)
                + run_cases(results, config, name))
    xml = document([out])
    # the run's time is no test case's: the suite and document carry it (statistics sum
    # the cases')
    out.time = xml.time = _duration_s(results)
    return xml


def property_cases(results: RunVerdict, classname: str) -> list[TestCase]:
    """A test case per property of ``catalogue.anomalies.PROPERTIES`` (see the module's
    docstring), of class ``classname``. A property none of whose anomalies had anything to
    check (``RunVerdict.not_applicable``: no transaction, consumer group or share group ran)
    is ``<skipped>`` with why: a passed case would say it was checked."""
    counted = set(results.counted()) if results.exit_code == EXIT_ANOMALIES else set()
    # the steady state's own case (run_cases) says why it could not be judged
    reasons = [r for r in results.unknown_reasons if not r.startswith(UNJUDGED)]
    if results.valid is None and not results.unknown_reasons:
        reasons = ["no verdict"]
    cases = []
    unchecked = results.not_applicable
    for prop, names in PROPERTIES.items():
        case = TestCase(prop, classname=classname)
        mine = [n for n in names if n in counted]
        concern = [r for r in reasons if _concerns(r, names)]
        if mine:
            failure = Failure(_summary(results, mine), "violation" if set(mine) & set(
                results.violations) else "anomaly")
            failure.text = _explanations(results, mine)
            case.result = [failure]
        elif all(n in unchecked for n in names):
            # the reasons every one of them shares say it best (no group: no eos-duplicate)
            shared = set.intersection(*(set(unchecked[n]) for n in names))
            why = "; ".join(r for r in dict.fromkeys(r for n in names for r in unchecked[n])
                            if not shared or r in shared)
            case.result = [Skipped(f"not applicable: {why}")]
        elif concern:
            error = Error("; ".join(concern), "unknown")
            error.text = "\n".join(concern)
            case.result = [error]
        permitted = [n for n in names if n in results.permitted]
        if permitted:
            case.system_out = ("permitted anomalies (the configuration allows them):\n"
                               + _explanations(results, permitted))
        cases.append(case)
    return cases


def run_cases(results: RunVerdict, config: dict[str, Any] | None,
              classname: str) -> list[TestCase]:
    """The test cases of what the run itself had to do: each fault asked for ran, the
    scenario's preconditions held, the final heal completed (from the run's facts,
    ``RunVerdict.run``; none when the facts do not say)."""
    config = config or {}
    facts = results.run
    cases = []
    if "faults_not_run" in facts:
        for package in config.get("nemesis") or []:
            case = TestCase(f"fault {package}", classname=classname)
            if package in facts["faults_not_run"]:
                case.result = [Skipped(f"{package} was asked for and never ran: the run did "
                                       "not test it (a longer --time-limit gives every fault "
                                       "its turn)")]
            cases.append(case)
    if config.get("scenario") and "scenario" in facts:
        case = TestCase("scenario preconditions", classname=classname)
        if unmet := (facts.get("scenario") or {}).get("unmet"):
            case.result = [Error(f"scenario precondition not met: {unmet}", "unknown")]
        cases.append(case)
    if "heal_left" in facts:
        case = TestCase("final heal", classname=classname)
        if facts["heal_left"]:
            case.result = [Error("; ".join(facts["heal_left"]), "unknown")]
        cases.append(case)
    if steady := results.steady_state:
        case = TestCase("steady state", classname=classname)
        if steady.get("broken"):
            failure = Failure("; ".join(steady["broken"]), "steady-state")
            failure.text = results.availability_line() or ""
            case.result = [failure]
        elif steady.get("held") is None:
            case.result = [Error(f"{UNJUDGED}: {steady.get('unjudged')}", "unknown")]
        cases.append(case)
    return cases


def _concerns(reason: str, names: list[str]) -> bool:
    """Whether an unknown reason concerns the property of anomalies ``names``: it names one
    of them, or names no anomaly at all (then it concerns every property)."""
    named = [n for n in ANOMALIES if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", reason)]
    return not named or bool(set(named) & set(names))


def testcase(results: RunVerdict, config: dict[str, Any] | None,
             name: str | None = None) -> TestCase:
    """The one test case of a whole verdict (named ``case_name`` unless ``name`` is given), as
    a comparison's ``junit.xml`` has one per run: passed, a ``<failure>`` when the exit code
    is 1 (the counted anomalies), an ``<error>`` when it is 2 (the ``unknown_reasons``)."""
    case = TestCase(name or case_name(results, config), classname=SUITE,
                    time=_duration_s(results))
    code = results.exit_code
    broken = results.steady_state.get("broken")
    if code == EXIT_ANOMALIES and broken and not results.counted():
        failure = Failure("; ".join(broken), "steady-state")
        failure.text = results.availability_line() or ""
        case.result = [failure]
    elif code == EXIT_ANOMALIES:
        names = results.counted() or list(results.anomaly_types)
        failure = Failure(_summary(results, names),
                          "violation" if results.violations else "anomaly")
        failure.text = _explanations(results, names)
        case.result = [failure]
    elif code == EXIT_UNKNOWN:
        reasons = results.unknown_reasons or ["no verdict"]
        error = Error("; ".join(reasons), "unknown")
        error.text = "\n".join(reasons)
        case.result = [error]
    if results.permitted:
        case.system_out = ("permitted anomalies (the configuration allows them):\n"
                           + _explanations(results, results.permitted))
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


def write(run_dir: Path, results: RunVerdict, config: dict[str, Any] | None) -> Path:
    """Write ``run_dir/junit.xml`` (atomically) for ``results`` and return its path."""
    path = Path(run_dir) / "junit.xml"
    tmp = path.with_suffix(".xml.tmp")
    build(results, config).write(str(tmp), pretty=True)
    tmp.replace(path)
    return path


def _summary(results: RunVerdict, names: list[str]) -> str:
    anomalies = results.anomalies
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


def _explanations(results: RunVerdict, names: list[str]) -> str:
    anomalies = results.anomalies
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


def _seed(results: RunVerdict | None, config: dict[str, Any]) -> Any:
    seed = results.run.get("seed") if results is not None else None
    return config.get("seed") if seed is None else seed


def _duration_s(results: RunVerdict) -> float:
    """Seconds the run took (cluster, workload and teardown) plus the analysis."""
    total = results.run.get("total_s") or 0
    return round(float(total) + float(results.analysis_time_s or 0), 3)


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
