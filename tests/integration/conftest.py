"""Real-cluster tests: root, network namespaces, real Kafka JVMs, real iptables.

After the session, nothing may be left: no broker JVM, namespace, bridge, iptables rule,
labelled container or network, or rule in the ssh test hosts' own chains.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from kc_needs import housekeeping
from kc_workers import is_system

from kafka_chaos.clusters import backends, dist
from kafka_chaos.clusters.backends import BackendOptions
from tests.integration.sshd_hosts import PREFIX as SSH_PREFIX
from tests.integration.sshd_hosts import SshHosts
from tests.preconditions import require

ROOT = Path(__file__).resolve().parents[2]


def _sigint_as_ctrl_c() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


#: ``Popen`` keyword arguments for a runner a test interrupts with SIGINT: its Python then
#: takes SIGINT as Ctrl-C even when the suite itself runs as a background job, which a
#: non-interactive shell starts with SIGINT ignored (POSIX), and Python keeps an ignored
#: SIGINT ignored: the runner then ran to its end and exited 0.
INTERRUPTIBLE = {"preexec_fn": _sigint_as_ctrl_c}


def leftovers() -> list[str]:
    """Everything a run may have left on the host, as readable strings (the suite's own
    check: whatever the calling test's markers, ``housekeeping``)."""
    with housekeeping():
        return _leftovers()


def _leftovers() -> list[str]:
    found = []
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found += [f"namespace {line.split()[0]}" for line in ns.splitlines() if line.startswith("kc-")]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    found += [f"link {line.split(':')[1].strip()}" for line in links.splitlines()
              if line.split(":")[1].strip().startswith("kc-")]
    rules = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
    found += [f"rule {r}" for r in rules.splitlines() if "kc-" in r]
    pids = subprocess.run(["pgrep", "-f", "kafka.Kafka"], capture_output=True, text=True).stdout
    found += [f"broker pid {p}" for p in pids.split()]
    mounts = Path("/proc/mounts").read_text().splitlines()
    found += [f"mount {line.split()[1]}" for line in mounts if "kafka-chaos-lossyfs" in line]
    pids = subprocess.run(["pgrep", "-f", "kafka_chaos.clusters.lossyfs"], capture_output=True,
                          text=True).stdout
    found += [f"lossyfs daemon pid {p}" for p in pids.split()]
    pids = subprocess.run(["pgrep", "-f", "kafka_chaos.workloads.child"], capture_output=True,
                          text=True).stdout
    found += [f"child client pid {p}" for p in pids.split()]
    for host in [line.split()[0] for line in ns.splitlines() if line.startswith(SSH_PREFIX)]:
        rules = subprocess.run(["ip", "netns", "exec", host, "iptables", "-S"],
                               capture_output=True, text=True).stdout
        found += [f"rule on ssh host {host}: {r}" for r in rules.splitlines() if "-chaos-" in r]
    docker = [] if shutil.which("docker") is None else [
        ("container", ["ps", "-a", "--format", "{{.Names}}"]),
        ("network", ["network", "ls", "--format", "{{.Name}}"])]
    for what, argv in docker:
        out = subprocess.run(["docker", *argv, "--filter", "label=kafka-chaos.prefix"],
                             capture_output=True, text=True).stdout
        found += [f"docker {what} {name}" for name in out.split()]
    return found


@pytest.fixture(scope="module", autouse=True)
def _machine_checked(request):
    """A module of tests that change this machine (``kc_workers.is_system``) runs inside
    ``nothing_left_behind``, which is set up before the module's own clusters (an autouse
    fixture of module scope comes first); the others, which an xdist worker may run beside
    such tests, must neither clean up nor check the machine under them."""
    if any(is_system(item) for item in request.session.items if item.module is request.module):
        request.getfixturevalue("nothing_left_behind")


@pytest.fixture(scope="session")
def nothing_left_behind():
    """Every backend's leftovers cleaned up before the first such test; after the last one,
    none may be left (and they are cleaned up again)."""
    if os.geteuid() != 0:
        pytest.skip("real-cluster tests need root (network namespaces, iptables)")
    with housekeeping():
        for name in backends.OWN:
            backends.get(name).cleanup(BackendOptions())
    yield
    with housekeeping():
        left = _leftovers()
        for name in backends.OWN:
            backends.get(name).cleanup(BackendOptions())
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    left += [f"ssh test host {line}" for line in ns.splitlines() if line.startswith(SSH_PREFIX)]
    assert not left, f"tests left these behind: {left}"


@pytest.fixture(scope="session")
def ssh_hosts(tmp_path_factory, nothing_left_behind):
    """Four SSH hosts with a real sshd each (``sshd_hosts.SshHosts``), shared by the session.
    Inside ``nothing_left_behind``: a session fixture is set up before the module fixture
    that asks for that one, and its hosts would then still be up at its final check."""
    hosts = SshHosts(tmp_path_factory.mktemp("ssh-hosts"), 4).start()
    yield hosts
    # torn down in the session's last test, whatever that one is marked
    with housekeeping():
        hosts.stop()


def backend_param(name: str, *values, marks=()):
    """A test parameter of backend ``name`` (followed by ``values``), marked ``docker`` when it is
    the docker backend's, with ``marks`` besides."""
    extra = (pytest.mark.docker,) if name == "docker" else ()
    return pytest.param(name, *values, marks=(*extra, *marks), id="-".join(
        map(str, (name, *values))))


def prepare(request, name: str, kafka: dist.KafkaDist, roles: list[list[str]],
            path: Path, **inventory_defaults) -> tuple[BackendOptions, list[str]]:
    """What backend ``name`` needs for a cluster of nodes with ``roles`` (in node id order):
    ``BackendOptions`` and the same as CLI arguments. docker: an image built here (no registry,
    cached by hash); ssh: an inventory of the session's SSH hosts written to ``path``, with
    ``inventory_defaults`` among its defaults."""
    if name == "docker":
        import docker

        from kafka_chaos.clusters import docker_image

        image = docker_image.ensure_image(docker.from_env(), kafka)
        return BackendOptions(image=image), ["--backend", "docker", "--image", image]
    if name == "ssh":
        inventory = request.getfixturevalue("ssh_hosts").inventory(path, roles,
                                                                   **inventory_defaults)
        return BackendOptions(inventory=inventory), ["--backend", "ssh", "--inventory",
                                                     str(inventory)]
    return BackendOptions(), ["--backend", name]


def kafka_chaos(*args: str, timeout_s: float = 600) -> subprocess.CompletedProcess:
    """Run the real CLI as a user would, from the repository root."""
    return subprocess.run([sys.executable, "-m", "kafka_chaos", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout_s)


def results_of(run_dir: Path, proc: subprocess.CompletedProcess | None = None) -> dict:
    """``run_dir/results.json``; when the run wrote none, fails showing what the CLI printed
    (the run's own error is the only trace a CI log keeps)."""
    path = run_dir / "results.json"
    assert path.exists(), f"no {path}" + (f": {proc.stdout}{proc.stderr}" if proc else "")
    return json.loads(path.read_text())


def scenario_run(out: Path, name: str, steps: int, *flags: str
                 ) -> tuple[subprocess.CompletedProcess, Path, dict]:
    """``kafka-chaos run --scenario name *flags --out out``, checked to have done all its
    ``steps`` with none unmet (a scenario proves its own preconditions); returns ``(the
    process, the run directory, results.json)``."""
    proc = kafka_chaos("run", "--scenario", name, *flags, "--out", str(out))
    run_dir = out / "latest"
    res = results_of(run_dir, proc)
    scenario = res["run"]["scenario"]
    steps_done(scenario, steps)
    return proc, run_dir, res


def steps_done(scenario: dict, steps: int, *context: object) -> None:
    """Require (``tests.preconditions``) that a scenario run did all its ``steps`` with no
    precondition unmet (``scenario``: ``run.scenario`` of ``results.json``, or ``scenario``
    of ``run.json``): a scenario proves its own preconditions. ``context`` is shown with the
    scenario when it did not."""
    require(scenario["steps_done"] == steps and "unmet" not in scenario, (scenario, *context))


def nothing_lost(res: dict) -> None:
    """No acknowledged write lost, unseen, duplicated or moved to another offset
    (``results.json``): what the safe configuration promises under each fault."""
    for anomaly in ("lost-write", "unseen", "duplicate", "inconsistent-offsets"):
        assert res["anomalies"][anomaly]["count"] == 0, (anomaly, res["anomalies"][anomaly])


def faults_observed(run_dir: Path, proc: subprocess.CompletedProcess,
                    faults: set[str]) -> dict:
    """Check a run on a cluster that must keep its promises under ``faults`` (the nemesis
    ``f`` values): valid; every fault ran and healed; and, its preconditions
    (``tests.preconditions``), the monitor saw a broker stop answering and an ISR shrink.
    Returns ``run.json``."""
    results = results_of(run_dir, proc)
    facts = json.loads((run_dir / "run.json").read_text())
    assert results["valid"] is True, proc.stdout[-4000:]
    assert not facts["faults_not_run"] and not facts["heal_left"], facts
    ops = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()
           if '"index"' in line]
    done = {op["f"] for op in ops if op["process"] == "nemesis" and op["type"] == "ok"}
    require(faults <= done, {"faults done": sorted(done), "asked": sorted(faults)})
    samples = [op["value"] for op in ops if op.get("f") == "cluster-state"
               and op["type"] == "ok"]
    require(any(not all(s["answering"].values()) for s in samples),
            "the monitor never saw a broker stop answering")
    require(any(len(p["isr"]) < len(p["replicas"]) for s in samples if s["partitions"]
                for parts in s["partitions"].values() for p in parts),
            "the monitor never saw an ISR shrink")
    return facts


def down_removed(proc: subprocess.CompletedProcess) -> list[str]:
    """What ``kafka-chaos cluster down`` printed it removed, less the warm-up histories: those
    are swept machine-wide (``analysis.warm.remove_stale``), so a run another test worker
    SIGKILLed may leave one for any ``down`` to find. ``[]`` is "nothing to remove"."""
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return [line for line in lines if line != "nothing to remove"
            and not line.startswith("removed warm-up history ")]


def free_port() -> int:
    """A TCP port of 127.0.0.1 free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hadoop_version() -> str:
    """The Hadoop version pyspark ships (its ``hadoop-client-runtime`` jar), which the Hadoop
    jars the tests fetch from Maven Central must match."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    return next(m.group(1) for p in jars.iterdir()
                if (m := re.fullmatch(r"hadoop-client-runtime-(.+)\.jar", p.name)))


def history_gen():
    """The simulated histories with seeded anomalies (``generate(dir, ops, anomalies, seed)``
    writes one and returns the expected counts)."""
    from kafka_chaos.history.simulate import vignettes

    return vignettes
