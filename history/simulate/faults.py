"""A simulated run directory shaped like a real run under faults, for report tests and benches.

    from kafka_chaos.history.simulate import generate_run
    planted = generate_run(run_dir, client_ops=2000, seed=1)

Writes ``history.jsonl`` (format 2, ``docs/history-format.md``) and its columnar copy,
``config.json`` and ``command.txt``; no ``results.json`` (run ``kafka-chaos analyze`` for a
real verdict). What happens, by a discrete-event simulation of 3 brokers:

- ``workers`` client workers (``rate`` client ops/s together) each ``assign`` every key, then
  send 1-3 values (75 %) or poll (25 %); 1 % of sends ``fail`` (``NOT_ENOUGH_REPLICAS``);
- every ``fault_interval_s`` a fault starts (kill, pause or partition of a node; the first is
  always a kill of partition 0's leader), and one interval later it is undone. The partitions
  the node led have no leader for ``ELECTION_S``; sends to them end ``info`` after waiting and
  their process is retired (a new id takes its place, as in the real workload). The node
  leaves the ISRs and rejoins them ``REJOIN_S`` after the heal;
- the monitor samples every 500 ms and after every nemesis op (leader, epoch, ISR, answering);
- planted anomalies: at the first kill, the last ``lost`` acknowledged values of key 0 are
  truncated from the log (later sends reuse their offsets: ``lost-write`` and
  ``inconsistent-offsets``); ``duplicates`` sends are appended twice (``duplicate``, permitted
  without idempotence);
- ``heal-all``, then final reads of every key in chunks of ``chunk`` records.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Callable

from kafka_chaos.history.simulate.core import MS, NODES, TOPIC, Simulation, nodes_header
from kafka_chaos.history.simulate.core import S as _S

#: Seconds a partition whose leader was lost has no leader.
ELECTION_S = 1.5
#: Seconds after a heal until the node is back in every ISR.
REJOIN_S = 1.0


def generate(run_dir: Path, *, client_ops: int = 2000, seed: int = 1, rate: float = 100.0,
             workers: int = 4, keys: int = 2, fault_interval_s: float = 8.0, lost: int = 2,
             duplicates: int = 1, chunk: int = 10_000) -> dict[str, Any]:
    """Write a simulated run into ``run_dir`` (created; ``FileExistsError`` when it holds a
    history).

    Args:
        client_ops: client operations of the workload (each is two lines; monitor, nemesis
            and final-read lines come on top).
        rate: client ops per second, all workers together (sets the simulated duration).

    Returns what was planted: ``{"lost": [(key, value, offset)], "duplicates": [(key,
    value)], "faults": [(start f, target node, start s, stop s)], "duration_s": s}``.
    """
    from kafka_chaos import __version__
    from kafka_chaos.config import RunConfig

    rng = random.Random(seed)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if (run_dir / "history.jsonl").exists():  # before config.json: nothing is overwritten
        raise FileExistsError(run_dir / "history.jsonl")
    config = RunConfig(seed=seed, keys=keys, clients=workers, rate=rate,
                       nemesis=["kill", "pause", "partition"],
                       nemesis_interval_s=fault_interval_s,
                       time_limit_s=max(1.0, client_ops / rate)).model_dump(mode="json")
    (run_dir / "config.json").write_text(json.dumps(config, indent=2))
    (run_dir / "command.txt").write_text(
        f"kafka-chaos run --nemesis kill,pause,partition --keys {keys} --clients {workers} "
        f"--rate {rate:g} --nemesis-interval {fault_interval_s:g} --seed {seed}\n")
    header = {"kafka_chaos": __version__, "kafka_version": config["kafka_version"],
              "config": config, "keys": {str(k): [TOPIC, k] for k in range(keys)},
              "nodes": nodes_header()}
    sim = Simulation(run_dir / "history.jsonl", header, keys, rng)
    sim.next_process = workers
    planted: dict[str, Any] = {"lost": [], "duplicates": [], "faults": []}
    state = {"ops": 0, "dups": duplicates,
             "truncate": lost, "workload_over": False, "in_flight": 0}
    unavailable_until = dict.fromkeys(range(keys), 0)
    think_ns = workers / rate * _S

    def assign_then_loop(process: int) -> None:
        value = {"keys": list(range(keys)), "seek": "beginning"}
        sim.write(process, "invoke", "assign", value)
        sim.at(sim.now + 1_000_000, lambda: (sim.write(process, "ok", "assign", value),
                                             next_op(process, [0] * keys)))

    def next_op(process: int, position: list[int]) -> None:
        state["in_flight"] -= 1
        if state["ops"] >= client_ops:
            return
        state["ops"] += 1
        state["in_flight"] += 1
        sim.at(sim.now + int(rng.expovariate(1 / think_ns)) + 1,
               lambda: (send if rng.random() < 0.75 else poll)(process, position))

    def send(process: int, position: list[int]) -> None:
        sends = [[rng.randrange(keys), sim.new_value()] for _ in range(rng.randint(1, 3))]
        sim.write(process, "invoke", "send", [["send", k, v] for k, v in sends])
        down = {k for k, _ in sends if unavailable_until[k] > sim.now}
        latency = int(rng.lognormvariate(15.5, 0.5))  # ~5 ms
        fail = rng.random() < 0.01
        if down:  # waits for the election, then times out
            latency += max(unavailable_until[k] for k in down) - sim.now

        def done() -> None:
            timed_out = bool(down)
            result = []
            for k, v in sends:
                if fail or k in down:
                    result.append(["send", k, [None, v]])
                    continue
                if state["dups"] and rng.random() < 0.05:  # a retry appended it twice
                    state["dups"] -= 1
                    sim.logs[k].append(v)
                    planted["duplicates"].append((k, v))
                sim.logs[k].append(v)
                result.append(["send", k, [len(sim.logs[k]) - 1, v]])
            if fail:
                sim.write(process, "fail", "send", result, "NOT_ENOUGH_REPLICAS")
            elif timed_out:
                sim.write(process, "info", "send", result, "_MSG_TIMED_OUT")
                return assign_then_loop(sim.new_process())
            else:
                sim.write(process, "ok", "send", result)
            next_op(process, position)
        sim.at(sim.now + latency, done)

    def poll(process: int, position: list[int]) -> None:
        sim.write(process, "invoke", "poll", [["poll"]])

        def done() -> None:
            read = {}
            for k in range(keys):
                start = min(position[k], len(sim.logs[k]))
                recs = [[o, sim.logs[k][o]] for o in range(start, min(start + 5,
                                                                      len(sim.logs[k])))]
                if recs:
                    read[str(k)] = recs
                    position[k] = recs[-1][0] + 1
            sim.write(process, "ok", "poll", [["poll", read]])
            next_op(process, position)
        sim.at(sim.now + int(rng.uniform(1e6, 4e6)), done)

    def nemesis(f: str, value: Any, result: Any, after: Callable[[], None]) -> None:
        sim.write("nemesis", "invoke", f, value)
        sim.now += 30_000_000
        after()
        sim.write("nemesis", "ok", f, result)
        sim.sample(f"after {f}", took_ns=2 * MS)

    def lose_leadership(node: int) -> None:
        for p in range(keys):
            if sim.leader[p] == node:
                sim.leader[p] = -1
                unavailable_until[p] = sim.now + int(ELECTION_S * _S)

                def elect(p: int = p) -> None:
                    sim.leader[p] = next(n for n in sim.isr[p] if n != node)
                    sim.epoch[p] += 1
                    sim.isr[p] = [n for n in sim.isr[p] if n != node]
                sim.at(unavailable_until[p], elect)
            else:
                sim.at(sim.now + int(ELECTION_S * _S),
                       lambda p=p: sim.isr.__setitem__(p, [n for n in sim.isr[p] if n != node]))

    def fault(n: int) -> None:
        if state["workload_over"]:
            return
        kind = "kill" if n == 0 else rng.choice(["kill", "pause", "partition"])
        node = sim.leader[0] if n == 0 or rng.random() < 0.5 else rng.choice(NODES)
        if node < 0:
            node = NODES[0]
        name = f"n{node}"
        start = sim.now
        state["open"] = (kind, node, start / _S)
        if n == 0 and state["truncate"]:  # the new leader lacks the old one's last records
            cut = min(state["truncate"], len(sim.logs[0]))
            for offset in range(len(sim.logs[0]) - cut, len(sim.logs[0])):
                planted["lost"].append((0, sim.logs[0][offset], offset))
            del sim.logs[0][len(sim.logs[0]) - cut:]
        if kind == "partition":
            others = [f"n{m}" for m in NODES if m != node]
            nemesis("partition", {"target": "isolate-one", "topic": TOPIC, "partition": 0},
                    {"isolated": [[name], others]}, lambda: lose_leadership(node))
        else:
            def down() -> None:
                sim.answering[node] = False
                lose_leadership(node)
            nemesis(kind, {"target": "leader" if node == sim.leader[0] else "one",
                           "topic": TOPIC, "partition": 0},
                    {"killed" if kind == "kill" else "paused": [name]}, down)
        stop_f = {"kill": "start", "pause": "resume", "partition": "heal"}[kind]
        stop_value = {"start": {"started": [name]}, "resume": {"resumed": [name]},
                      "heal": {"healed": True}}[stop_f]

        def heal() -> None:
            def up() -> None:
                sim.answering[node] = True
                sim.at(sim.now + int(REJOIN_S * _S), lambda: [
                    sim.isr.__setitem__(p, sorted(set(sim.isr[p]) | {node}))
                    for p in range(keys)])
            if state["workload_over"]:  # heal-all undid it
                return
            nemesis(stop_f, None, stop_value, up)
            planted["faults"].append((kind, node, start / _S, sim.now / _S))
            state["open"] = None
            sim.at(sim.now + int(fault_interval_s * _S), lambda: fault(n + 1))
        sim.at(sim.now + int(fault_interval_s * _S), heal)

    def periodic() -> None:
        if not state["workload_over"]:
            sim.sample("period", took_ns=2 * MS)
            sim.at(sim.now + _S // 2, periodic)

    def end_of_workload() -> None:
        if state["ops"] < client_ops or state["in_flight"] > 0:
            return sim.at(sim.now + _S // 10, end_of_workload)
        state["workload_over"] = True
        sim.write("nemesis", "invoke", "heal-all", None)
        for n in NODES:
            sim.answering[n] = True
        for p in range(keys):
            sim.isr[p] = list(NODES)
            if sim.leader[p] < 0:
                sim.leader[p], sim.epoch[p] = NODES[0], sim.epoch[p] + 1
        sim.now += 50_000_000
        sim.write("nemesis", "ok", "heal-all", {"kill": [], "partition": {"healed": True}})
        if state.get("open"):
            planted["faults"].append((*state["open"], sim.now / _S))
        sim.sample("after heal-all", took_ns=2 * MS)
        sim.final_reads({k: (list(enumerate(log)), len(log)) for k, log in enumerate(sim.logs)},
                        chunk, 5 * MS)

    for w in range(workers):
        state["in_flight"] += 1
        sim.at(w * 1_000_000, lambda w=w: assign_then_loop(w))
    sim.at(_S // 2, periodic)
    sim.at(int(fault_interval_s * _S), lambda: fault(0))
    sim.at(_S, end_of_workload)
    sim.run()
    sim.close()
    planted["duration_s"] = sim.now / _S
    return planted
