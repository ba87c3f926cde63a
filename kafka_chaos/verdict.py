"""The verdict of a run, for every renderer: ``RunVerdict``, built once (``build``) from the
analysis result judged with what the run itself proved (``judge_run``), the availability
figures and ``--fail-on``; its exit code and its banner (one kind, one headline, the reasons
it is unknown). ``results.json`` is its JSON form; the terminal, ``summary.md``, JUnit, the
HTML report and the comparison tables only render it.

Exit codes of every command (``docs/report.md``): 0 valid; 1 anomalies counted under
``--fail-on``, or a steady-state limit broken (``--max-unavailable``, ``--max-recovery``:
``kafka_chaos.steady``); 2 the verdict is unknown (the record cannot decide, a precondition
was not met, an interrupt); 254 bad input (a flag, a plan, a history, a file or an
environment the run cannot use: fix it and run again; Jepsen's code for bad arguments); 255
the tool failed while it ran (a cluster that did not come up, a crash of the run or of the
analysis, a report that could not be written; Jepsen's code for a crash). Never 0 when the
analysis failed. A command that reports (``history``, ``cluster status``, ``spark-server
status``) judges nothing: 0 whatever it finds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, computed_field, model_validator

from kafka_chaos import steady
from kafka_chaos.catalogue.anomalies import CATALOGUE, NEEDED
from kafka_chaos.catalogue.faults import LOWERED, OFFSET_CHECKPOINTS
from kafka_chaos.errors import ReportError

#: Exit codes (the module's docstring).
EXIT_VALID, EXIT_ANOMALIES, EXIT_UNKNOWN, EXIT_BAD_INPUT, EXIT_ERROR = 0, 1, 2, 254, 255
#: ``--fail-on`` choices: exit 1 on a violation only, or on any anomaly found.
FAIL_ON = ("violation", "any")
#: The availability figures (``RunVerdict.availability_shown``) that tables and JUnit
#: properties carry, each with its table heading.
AVAILABILITY = {"acked_pct": "acked %", "no_ack_pct": "no ack, time %",
                "longest_no_ack_s": "longest no ack, s",
                "slowest_recovery_s": "slowest recovery, s",
                "slowest_read_s": "slowest first read, s", "unrecovered": "unrecovered"}


def exit_code(result: dict, fail_on: str = "violation") -> int:
    """The exit code of a verdict.

    ``fail_on="violation"``: 1 when ``valid`` is False (an anomaly the configuration does not
    permit), 0 when True, 2 when ``"unknown"``. ``fail_on="any"``: 1 when any anomaly was found,
    permitted or not (false ranks above unknown, as in Jepsen's ``checker/compose``), else as
    for ``violation``.
    """
    if fail_on == "any" and result.get("anomaly_types"):
        return EXIT_ANOMALIES
    valid = result.get("valid")
    if valid is True:
        return EXIT_VALID
    if valid is False:
        return EXIT_ANOMALIES
    return EXIT_UNKNOWN


def _share_state(share: dict) -> list[str]:
    """Why a share group's state after its quiet drain leaves the verdict unknown: the
    coordinator did not describe it, or a share-partition's start offset (SPSO) stops short
    of its end (lag above 0: records the broker still counts as in flight or available,
    which the drain never got and the history cannot name)."""
    after = share.get("after")
    if share.get("drain") != "ok":
        return []  # the checker judges no unsettled record then (share-not-judged)
    if not isinstance(after, dict):
        return [f"the share group {share.get('group')} was not described after its drain: "
                f"{after}"]
    stuck = {k: s for k, s in sorted(after.items()) if s.get("lag") != 0}
    if not stuck:
        return []
    shown = ", ".join(f"key {k}: start offset {s.get('start_offset')}, lag {s.get('lag')}"
                      for k, s in list(stuck.items())[:5])
    return [f"after its quiet drain, share group {share.get('group')} still holds records "
            f"the history cannot name ({shown})"]


#: The rules whose evidence is the damage itself (``analysis.promises``): their findings
#: are decided, whatever else the damage may have done.
DAMAGE_RULES = ("damage-served-unchecked", "last-in-sync-replica-cut-by-recovery")


def _after_damage(result: dict) -> list[str]:
    """The anomalies a file fault leaves undecided: those found with findings that no rule
    permits without an event of the run (``by_configuration``, ``promises.by_configuration``:
    G0 under ``interleaved-writes`` holds whatever a run does; a lost write permitted by an
    election may be the damage's instead) or by the damage itself (``DAMAGE_RULES``: the
    record at that offset was in a batch the damage reached unchecked, or that recovery cut
    from the last replica that had it)."""
    anomalies = result.get("anomalies") or {}
    return [n for n in result.get("anomaly_types") or []
            if (anomalies.get(n) or {}).get("count") is None
            or anomalies[n]["count"] > (anomalies[n].get("by_configuration") or 0)
            + sum((anomalies[n].get("rules") or {}).get(r, 0) for r in DAMAGE_RULES)]


def _detected(damage: dict) -> bool:
    """A file damage (``facts["file_damage"]``'s entry) that Kafka finds and repairs itself,
    so that nothing a client sees can follow from it (``docs/file-faults.md``): the active
    segment's offset or time index changed while its broker was down (recovery rebuilds
    both, R6), a producer-state snapshot changed in any way but a rollback (its version,
    layout and CRC are checked, a bad one deleted and the state rebuilt from an older one
    and the log, P1-P2), and an offset checkpoint, damaged or rolled back, that Kafka reads
    as offsets no higher than before (``"checkpoint": "lowered"``, ``nemesis.checkpoints``:
    a lower high watermark is raised again by replication and clamped into the log, K9b; a
    lower recovery point only recovers more, R3; a lower log start is raised to the first
    segment's base, R10). Entries that do not say whether the broker ran, or what the
    checkpoint's damage did, are not."""
    if damage.get("kind") in OFFSET_CHECKPOINTS:
        return damage.get("checkpoint") == LOWERED
    if damage.get("damage") == "rollback":
        return False
    if damage.get("kind") == "snapshot":
        return True
    return damage.get("kind") in ("index", "timeindex") and damage.get("running") is False


def _undetected(facts: dict) -> list[dict]:
    """The run's file damages that Kafka does not repair itself (``_detected``)."""
    return [d for d in facts.get("file_damage") or [] if not _detected(d)]


def _file_damage(result: dict, damaged: list[dict]) -> list[str]:
    """Why findings after a file fault decide nothing yet: but for a record the damage
    reached where nothing checks it, or that recovery cut from the last replica that had it
    (``DAMAGE_RULES``), no rule says what Kafka promises once a broker's own files are
    damaged (where a changed batch header sends a reader, what a damaged index or
    checkpoint does), so such an anomaly found in a run that damaged files is neither
    permitted nor a violation, and the verdict is unknown with the damage named; findings
    the configuration alone, or the damage, permits stay permitted (``_after_damage``).
    Without such a finding the run stays valid: nothing met the damage that the checkers
    could see."""
    found = _after_damage(result)
    if not damaged or not found:
        return []
    files = ", ".join(f"{d['damage']} of {d['node']}'s {d['file']}" for d in damaged[:5])
    more = f" and {len(damaged) - 5} more" if len(damaged) > 5 else ""
    return [f"files were damaged ({files}{more}) and the run found {', '.join(found)}: no "
            "rule of kafka-chaos judges these findings after a file fault yet, so they are "
            "neither permitted nor violations"]


def judge_run(result: dict, facts: dict) -> dict:
    """Merge what the run itself proved into the analysis verdict (Jepsen's ``checker/compose``
    order, false > unknown > true): a scripted scenario whose precondition was not met
    (``facts["scenario"]["unmet"]``, e.g. the ISR never shrank) makes a valid result
    ``"unknown"`` with the unmet step among ``unknown_reasons``; violations found stay
    violations. So does a final heal that did not complete (``facts["heal_left"]``: a fault
    that could not be undone, a node not running) or after which the cluster did not recover
    (``facts["recovery_error"]``: a node that died again, an ISR never full; ``facts["halted"]``
    names the brokers whose log says they stopped for good, and why), and a client
    driver that failed while the workload ran (``facts["client"]["failed"]``), or a consumer
    group that did not run the protocol asked for (``facts["group"]``), or a share group
    whose state after its final drain still holds records (``facts["share"]``). A run that
    damaged files (``facts["file_damage"]``, ``nemesis.files``; but for damage Kafka repairs
    itself, ``_detected``) and found any anomaly is unknown, a violation too
    (``_file_damage``). The faults asked for that never ran
    (``facts["faults_not_run"]``) are named in ``result["faults_not_run"]`` (the verdict
    stands: what ran was checked). Returns ``result``, changed in place."""
    reasons = []
    if unmet := (facts.get("scenario") or {}).get("unmet"):
        reasons.append(f"scenario precondition not met: {unmet}")
    if left := facts.get("heal_left"):
        reasons.append(f"the final heal did not complete: {'; '.join(left)}")
    elif error := facts.get("recovery_error"):  # healed, then a node died or never rejoined
        halted = "".join(f"; {name} stopped for good: {why}"
                         for name, why in sorted((facts.get("halted") or {}).items()))
        reasons.append(f"the cluster did not recover after the final heal: {error}{halted}")
    group = facts.get("group") or {}
    if group.get("asked") == "consumer" and group.get("type") != "consumer":
        reasons.append(f"--group-protocol consumer asked, but the coordinator describes the "
                       f"group as {group.get('type')}: the run did not test KIP-848")
    if share := facts.get("share"):
        reasons.extend(_share_state(share))
    if failed := (facts.get("client") or {}).get("failed"):
        reasons.append(f"the client driver failed while the workload ran: {failed}")
    reasons.extend(_file_damage(result, _undetected(facts)))
    if facts.get("faults_not_run"):
        result["faults_not_run"] = list(facts["faults_not_run"])
    for reason in reasons:
        if reason not in result.setdefault("unknown_reasons", []):
            result["unknown_reasons"].append(reason)
        if result.get("valid") is True:
            result["valid"] = "unknown"
    if _undetected(facts) and _after_damage(result):
        result["valid"] = "unknown"  # a violation too: no rule says what Kafka promises there
    return result


class RunVerdict(BaseModel):
    """A run's whole verdict: the content of ``results.json`` (``docs/report.md``) as one
    record. Built by ``build`` (after a verdict), ``unknown`` (no verdict reached) or
    ``load`` (an earlier ``results.json``); renderers read it and change nothing.

    The analysis fields are ``analysis.check``'s (its docstring gives their shapes):
    ``anomalies`` maps every anomaly name to its count, examples and judgement; ``stats``
    counts ops; ``cycle_search``, ``timings_s`` (s) and ``analysis_time_s`` (s) time the
    analysis. Beside them: ``valid`` (True, False, or None when unknown: JSON readers need not
    know the analysis's ``"unknown"``), ``fail_on``, ``faults_not_run`` (``judge_run``),
    ``availability`` (acknowledged share and unavailable windows, ``report.stats.summary``;
    empty when the history could not be read for it), ``steady_state`` (the limits set on
    it and whether they held, ``steady.judge``; empty without limits), ``run`` (the run's
    own facts:
    ``runner.run``'s ``run.json``), ``client`` (the library the workload ran, ``{"name",
    "version"}``) and ``kafka_chaos_version`` (the version that judged it). ``verdict`` (the
    one word), ``exit_code`` and ``not_applicable`` follow from them. Keys a later version
    adds are kept."""

    model_config = ConfigDict(extra="allow")

    valid: bool | None = None
    fail_on: Literal["violation", "any"] = "violation"
    anomalies: dict[str, dict[str, Any]] = {}
    anomaly_types: list[str] = []
    violations: list[str] = []
    permitted: list[str] = []
    unexplained: list[str] = []
    unknown_reasons: list[str] = []
    faults_not_run: list[str] = []
    chances: dict[str, int] = {}
    availability: dict[str, Any] = {}
    steady_state: dict[str, Any] = {}
    stats: dict[str, Any] = {}
    cycle_search: dict[str, Any] | None = None
    format: int | None = None
    config_known: bool | None = None
    analysis_time_s: float | None = None
    timings_s: dict[str, float] = {}
    run: dict[str, Any] = {}
    client: dict[str, Any] | None = None
    kafka_chaos_version: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_json(cls, data: Any) -> Any:
        if isinstance(data, dict):
            # the computed fields of an earlier results.json: derived again, never trusted
            derived = ("verdict", "exit_code", "not_applicable")
            data = {k: v for k, v in data.items() if k not in derived}
            if not isinstance(data.get("valid"), bool):
                data["valid"] = None  # the analysis's "unknown"
            for key in ("run", "availability"):
                if data.get(key) is None:
                    data.pop(key, None)
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def verdict(self) -> str:
        """The one word: ``valid`` (every anomaly found is permitted, if any),
        ``violation`` or ``unknown``."""
        return {True: "valid", False: "violation"}.get(self.valid, "unknown")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def exit_code(self) -> int:
        """The exit code of this verdict under ``fail_on`` (``exit_code``); 1 also when a
        steady-state limit broke (``steady_state["held"]`` False), whatever the history's
        verdict: false ranks above unknown."""
        if self.steady_state.get("held") is False:
            return EXIT_ANOMALIES
        return exit_code({"valid": self.valid, "anomaly_types": self.anomaly_types},
                         self.fail_on)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def not_applicable(self) -> dict[str, list[str]]:
        """The anomalies whose checker had nothing to check in this run, each with why:
        none found, and a client op it needs (``catalogue.anomalies.Anomaly.needs``) never
        completed ``ok`` (``stats["by_f"]``), e.g. ``{"group-skip": ["no consumer group ran
        (--sub-via subscribe)"]}``, or its checker said so itself (its result's
        ``not_applicable``: the quorum checks of a history whose monitor recorded no quorum
        state, ``analysis.quorum``). Empty without the op counts or such a result (no
        verdict)."""
        by_f = self.stats.get("by_f")
        ran = {f for f, types in (by_f or {}).items() if (types or {}).get("ok")}
        out = {}
        for a in CATALOGUE:
            if self.count(a.name) != 0:
                continue
            why = [NEEDED[f] for f in a.needs if f not in ran] if by_f else []
            said = (self.anomalies.get(a.name) or {}).get("not_applicable")
            if isinstance(said, str) and said not in why:
                why.append(said)
            if why:
                out[a.name] = why
        return out

    def not_applicable_by_reason(self) -> dict[str, list[str]]:
        """``not_applicable`` grouped: reason -> the anomalies it leaves unchecked, in report
        order."""
        out: dict[str, list[str]] = {}
        for name, why in self.not_applicable.items():
            out.setdefault("; ".join(why), []).append(name)
        return out

    def client_ops(self) -> int | None:
        """The client ops of the history (every ``stats["by_f"]`` outcome summed: what the
        breakdown by ``f`` adds up to; ``stats["ops"]`` counts history lines, the nemesis's
        and the monitor's included). None without the op counts."""
        by_f = self.stats.get("by_f")
        return sum(sum(types.values()) for types in by_f.values()) if by_f else None

    def count(self, name: str) -> int | None:
        """How many findings of anomaly ``name`` (0 when not checked, None when its checker
        raised)."""
        return (self.anomalies.get(name) or {"count": 0}).get("count")

    def banner(self) -> dict[str, Any]:
        """The verdict as every renderer shows it (terminal, report, comparison, trends):
        ``kind`` (``valid``, ``permitted``, ``violation`` or ``unknown``), a ``headline``
        and the ``reasons`` a verdict is unknown."""
        def listed(names: list[str]) -> str:
            return ", ".join(f"{n} ({self.count(n)})" for n in names)

        if self.valid is False:
            kind, headline = "violation", f"VIOLATIONS: {listed(self.violations)}"
        elif self.valid is True and self.permitted:
            kind, headline = "permitted", f"VALID, with permitted anomalies: " \
                                          f"{listed(self.permitted)}"
        elif self.valid is True:
            kind, headline = "valid", "VALID: no anomaly found"
        else:
            kind, headline = "unknown", "UNKNOWN: no verdict"
        if self.valid is not True and self.permitted:
            headline += f"; permitted: {listed(self.permitted)}"
        if self.faults_not_run:
            headline += f"; never ran: {', '.join(self.faults_not_run)}"
        broken = self.steady_state.get("broken") or []
        if broken:
            headline += f"; STEADY STATE BROKEN: {'; '.join(broken)}"
        if self.valid is True and self.exit_code == EXIT_ANOMALIES and not broken:
            # the word says valid, the exit code says 1: say why where the word is read
            found = sum(self.count(n) or 0 for n in self.permitted)
            headline += (f" (exit 1: --fail-on any counts {found} permitted "
                         f"finding{'s' if found != 1 else ''})")
        elif self.valid is not False and broken:
            headline += " (exit 1: a steady-state limit broke)"
        return {"kind": kind, "headline": headline, "reasons": list(self.unknown_reasons)}

    def availability_figures(self) -> dict[str, float | int | None]:
        """The run's availability as every view shows it (terminal, ``summary.md``,
        ``history``, JUnit), one definition rounded one way, from ``availability``
        (``report.stats.summary``); empty when it holds no figures:

        ``acked_pct``: % of the sends attempted that were acknowledged (2 decimals);
        ``no_ack_s`` of ``workload_s``, ``no_ack_pct``: the time inside windows of at least
        1 s in which no send was acknowledged (s, 1 decimal; % of the workload's time,
        1 decimal); ``longest_no_ack_s``: the longest such window (s, 1 decimal);
        ``slowest_recovery_s``: the longest time from a fault's heal to the first
        acknowledgement of a send invoked after it (s, 1 decimal; None without a recovered
        fault), ``slowest_read_s`` the same to the first poll that returned records, and
        ``unrecovered``: faults healed that no acknowledgement followed, though sends were
        invoked after them (a heal after the workload stopped shows no recovery, and counts
        in none of these)."""
        a = self.availability
        if not a.get("sends"):
            return {}
        healed = [r for r in a.get("recovery") or [] if r.get("sent_after", True)]
        waits = [r["first_ack_s"] for r in healed]
        known = [w for w in waits if w is not None]
        reads = [r["first_read_s"] for r in healed if r.get("first_read_s") is not None]
        return {"acked_pct": round(100 * a["acked"] / a["sends"], 2),
                "no_ack_s": round(a.get("unavailable_s") or 0.0, 1),
                "workload_s": round(a.get("workload_s") or 0.0, 1),
                "no_ack_pct": round(100 * (a.get("unavailable_share") or 0.0), 1),
                "longest_no_ack_s": round(a.get("longest_unavailable_s") or 0.0, 1),
                "slowest_recovery_s": round(max(known), 1) if known else None,
                "slowest_read_s": round(max(reads), 1) if reads else None,
                "unrecovered": len(waits) - len(known)}

    def availability_shown(self) -> dict[str, str]:
        """``availability_figures`` as text, each with its own digits (``acked_pct`` 2, the
        rest 1; ``unrecovered`` a count; ``""`` for None): what every table and property
        shows, so that the views' figures are equal as written."""
        def text(key: str, value: Any) -> str:
            if value is None:
                return ""
            return str(value) if key == "unrecovered" else \
                f"{value:.{2 if key == 'acked_pct' else 1}f}"

        return {k: text(k, v) for k, v in self.availability_figures().items()}

    def availability_line(self) -> str | None:
        """``availability_shown`` in one sentence (None without figures), e.g. ``95.24 % of
        2,100 sends acknowledged; no acknowledged send for 14.0 s of 28.0 s (50.0 %), longest
        9.0 s; slowest recovery after a heal 3.2 s``."""
        f = self.availability_shown()
        if not f:
            return None
        line = (f"{f['acked_pct']} % of {self.availability['sends']:,} sends acknowledged; "
                f"no acknowledged send for {f['no_ack_s']} s of {f['workload_s']} s "
                f"({f['no_ack_pct']} %), longest {f['longest_no_ack_s']} s")
        if f["slowest_recovery_s"]:
            line += f"; slowest recovery after a heal {f['slowest_recovery_s']} s"
            if f["slowest_read_s"]:
                line += f" (first read {f['slowest_read_s']} s)"
        if f["unrecovered"] != "0":
            line += f"; {f['unrecovered']} healed fault(s) never followed by an acknowledgement"
        return line

    def counted(self) -> list[str]:
        """The anomalies ``fail_on`` counts: every one found (``any``) or the violations."""
        return list(self.anomaly_types if self.fail_on == "any" else self.violations)

    def to_json(self) -> dict[str, Any]:
        """The JSON form (``results.json``'s content)."""
        return self.model_dump(mode="json")

    def write(self, run_dir: Path) -> Path:
        """Write ``run_dir/results.json`` atomically; returns its path."""
        path = Path(run_dir) / "results.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2, default=str))
        tmp.replace(path)
        return path

    @classmethod
    def load(cls, run_dir: Path) -> RunVerdict:
        """``run_dir/results.json``. Raises ``ReportError`` naming the file (and line, or
        field) when it is missing, not JSON, or not a verdict."""
        path = Path(run_dir) / "results.json"
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise ReportError(f"{path}: missing (run `kafka-chaos analyze {run_dir}` first)"
                              ) from None
        except json.JSONDecodeError as exc:
            raise ReportError(f"{path} line {exc.lineno}: not valid JSON ({exc.msg})"
                              ) from None
        except OSError as exc:
            raise ReportError(f"{path}: {exc.strerror}") from None
        if not isinstance(data, dict) or "valid" not in data:
            raise ReportError(f"{path}: not a verdict (a JSON object with the field valid)")
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(x) for x in first["loc"])
            raise ReportError(f"{path}: field {field}: {first['msg']}") from None

    @classmethod
    def unknown(cls, reason: str, facts: dict | None = None) -> RunVerdict:
        """The verdict of a run that reached none (its cluster did not come up, it crashed,
        it was interrupted, its analysis failed): unknown, ``reason`` the one reason."""
        from kafka_chaos import __version__

        facts = facts or {}
        return cls(unknown_reasons=[reason], run=facts, client=facts.get("client"),
                   kafka_chaos_version=__version__)


def build(result: dict[str, Any], facts: dict, fail_on: str,
          availability: dict[str, Any] | None = None,
          limits: dict[str, Any] | None = None) -> RunVerdict:
    """The run's verdict, the one place it is finished: ``result`` (``analysis.check``'s
    dict) judged with the run's ``facts`` (``judge_run``, which changes ``result`` in
    place), under ``fail_on`` (``FAIL_ON``), with the ``availability`` figures
    (``report.stats.summary``; None when the history could not be read for them) and the
    steady-state ``limits`` judged on them (``{"max_unavailable": "10%" or None,
    "max_recovery_s": s or None}``, ``steady.judge``; a limit that cannot be judged makes
    the verdict unknown with the reason).

    Raises ``pydantic.ValidationError`` when ``result`` is not ``analysis.check``'s shape
    (a bug, not bad input)."""
    from kafka_chaos import __version__

    judge_run(result, facts)
    decided = RunVerdict.model_validate({
        **result, "fail_on": fail_on, "availability": availability or {}, "run": facts,
        "client": facts.get("client"), "kafka_chaos_version": __version__})
    limits = limits or {}
    decided.steady_state = steady.judge(decided.availability_figures(),
                                        limits.get("max_unavailable"),
                                        limits.get("max_recovery_s"))
    if why := decided.steady_state.get("unjudged"):
        decided.unknown_reasons.append(f"{steady.UNJUDGED}: {why}")
        if decided.valid is True:
            decided.valid = None
    return decided
