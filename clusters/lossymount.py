"""Mounting, commanding and unmounting ``clusters.lossyfs`` on this machine.

One FUSE daemon per node data directory: ``<node>/data`` is the mount, ``<node>/data.disk``
what it writes through to. The daemon runs in its own session, outside the node's network
namespace (mounts are not namespaced by ``ip netns exec``, which makes ``/`` a slave of the
host's mounts, so the broker sees it).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from kafka_chaos.clusters.errors import ClusterError, EnvironmentUnsupported
from kafka_chaos.clusters.lossyfs import CONTROL
from kafka_chaos.waiting import WaitTimeout, wait_until


def check_environment() -> None:
    """Raise ``EnvironmentUnsupported`` (with the fix) unless FUSE can be mounted here:
    ``/dev/fuse``, ``fusermount3`` (Debian's ``fuse3``) and the ``mfusepy`` binding."""
    if not os.path.exists("/dev/fuse"):
        raise EnvironmentUnsupported("losing un-fsynced writes needs /dev/fuse (FUSE), absent here")
    if shutil.which("fusermount3") is None:
        raise EnvironmentUnsupported("`fusermount3` not found: apt-get install fuse3")
    try:
        import mfusepy  # noqa: F401  (loads libfuse3 too)
    except (ImportError, OSError) as exc:
        raise EnvironmentUnsupported(f"the FUSE binding mfusepy cannot load: {exc} "
                                     "(pip install mfusepy; apt-get install fuse3)") from None


def mount(backing: Path, mountpoint: Path, log: Path, timeout_s: float = 10.0) -> int:
    """Start a lossyfs daemon serving ``backing`` at ``mountpoint``; returns its pid once the
    mount answers. Raises ``ClusterError`` with the daemon's output when it does not."""
    backing.mkdir(parents=True, exist_ok=True)
    mountpoint.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kafka_chaos.clusters.lossyfs", str(backing),
                                 str(mountpoint)], stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    def mounted() -> bool:
        return os.path.ismount(mountpoint) and (mountpoint / CONTROL).exists()

    try:  # until it answers, or its daemon exited
        wait_until(lambda: mounted() or proc.poll() is not None, timeout_s, 0.05,
                   f"the lossy filesystem at {mountpoint}")
    except WaitTimeout:
        pass
    if mounted():
        return proc.pid
    proc.kill()
    raise ClusterError(f"the lossy filesystem did not mount at {mountpoint}: "
                       f"{log.read_text(errors='replace')[-1000:]}")


def command(mountpoint: Path, what: str) -> dict:
    """Send ``lose`` or ``sync`` to the daemon at ``mountpoint``; returns its report
    (``clusters.lossyfs``). Raises ``ClusterError`` when the mount does not answer."""
    control = mountpoint / CONTROL
    try:
        control.write_text(what)
        return json.loads(control.read_text())
    except (OSError, ValueError) as exc:
        raise ClusterError(f"the lossy filesystem at {mountpoint} did not take {what!r}: "
                           f"{exc}") from None


def daemons(mountpoint: Path) -> list[int]:
    """Pids of lossyfs daemons serving ``mountpoint`` (found by their command line)."""
    want = ["-m", "kafka_chaos.clusters.lossyfs"]
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if argv[1:3] == want and str(mountpoint) in argv:
            found.append(int(proc.name))
    return found


def unmount(mountpoint: Path, timeout_s: float = 10.0) -> bool:
    """Unmount (lazily if busy) and wait until its daemon has exited (SIGKILL after
    ``timeout_s``); True if something was mounted or a daemon was still there."""
    mounted = os.path.ismount(mountpoint)
    if mounted and subprocess.run(["fusermount3", "-u", str(mountpoint)],
                                  capture_output=True).returncode:
        subprocess.run(["fusermount3", "-uz", str(mountpoint)], capture_output=True)
    pids = daemons(mountpoint)
    if pids:
        try:
            wait_until(lambda: not daemons(mountpoint), timeout_s, 0.05,
                       f"the daemons of {mountpoint} to exit")
        except WaitTimeout:
            pass
    for pid in daemons(mountpoint):  # a daemon that does not exit once unmounted
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return mounted or bool(pids)
