"""The cases the reference-model property test plays (``tests/unit/test_model_oracle.py``),
as Hypothesis draws them, in an interpreter of their own.

Hypothesis mixes the literal constants of every module a process has loaded into what it
generates (its "local constants" pool, ``hypothesis.internal.conjecture.providers``), so
the same derandomized draw gives other cases in a test worker that ran other tests first:
2,000 cases drawn after ``test_promises.py`` held 1 duplicate where a fresh process's held
31. ``drawn`` therefore runs this module as a script, which loads only the model and
Hypothesis, and reads the cases back as JSON: the same cases on every run of the same code.

    python tests/oracle_cases.py N     # prints N cases as JSON
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from kafka_chaos.history.simulate.model_run import Config, Step

#: The kinds of step, the commoner ones repeated (``model_run.Step``).
KINDS = ("produce", "produce", "produce", "fetch", "fetch", "shrink", "fsync", "poll", "kill",
         "lose-power", "start", "blind", "txn", "end")
#: How a kill or power loss ends: mostly ok, sometimes of unknown outcome or failed.
ENDS = ("ok", "ok", "ok", "ok", "info", "info-none", "fail")

steps = st.lists(st.builds(Step, st.integers(0, 20_000), st.sampled_from(KINDS),
                           st.integers(0, 2), st.integers(1000, 9000), st.sampled_from(ENDS)),
                 min_size=4, max_size=15)
#: The producer's settings: none (retries=0), plain retries, the idempotent producer.
PRODUCERS = {"plain": {}, "retries": {"retries": True},
             "idempotent": {"retries": True, "idempotence": True}}


def config(acks: str, min_isr: int, unclean: bool, elr: bool, producer: str) -> Config:
    """A run's settings; retries only with acks=all, where an attempt can fail after the
    leader appended it (and a retry can write a second copy); transactions with the
    idempotent producer, read committed with min.insync.replicas=2 and uncommitted with 1
    (both isolation levels without more analyses)."""
    chosen = PRODUCERS[producer if acks == "all" else "plain"]
    if chosen.get("idempotence"):
        chosen = {**chosen, "transactions": True, "read_committed": min_isr == 2}
    return Config(acks, min_isr, unclean, elr, **chosen)


configs = st.builds(config, acks=st.sampled_from(["1", "all", "1", "all", "0"]),
                    min_isr=st.sampled_from([1, 2]), unclean=st.booleans(),
                    elr=st.booleans(), producer=st.sampled_from(list(PRODUCERS)))


def drawn_here(n: int) -> list[tuple[Config, list[Step]]]:
    """``n`` cases as Hypothesis generates them in this process (derandomized: the same
    ones for the same code and the same loaded modules)."""
    out: list[tuple[Config, list[Step]]] = []

    @settings(max_examples=n, derandomize=True, database=None, phases=[Phase.generate],
              deadline=None, suppress_health_check=list(HealthCheck))
    @given(configs, steps)
    def draw(config: Config, case: list[Step]) -> None:
        out.append((config, case))

    draw()
    return out


def drawn(n: int) -> list[tuple[Config, list[Step]]]:
    """``n`` cases drawn by this module run as a script (``drawn_here`` in a fresh
    interpreter): the same ones every run, whatever the calling process loaded.
    ``subprocess.CalledProcessError`` if the draw fails."""
    out = subprocess.run([sys.executable, str(Path(__file__)), str(n)], capture_output=True,
                         text=True, check=True).stdout
    return [(Config(**config), [Step(**step) for step in case])
            for config, case in json.loads(out)]


if __name__ == "__main__":
    print(json.dumps([[dataclasses.asdict(config), [dataclasses.asdict(s) for s in case]]
                      for config, case in drawn_here(int(sys.argv[1]))]))
