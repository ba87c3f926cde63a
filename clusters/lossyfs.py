"""A FUSE filesystem that can lose what was never fsynced: a node's power loss, for Kafka.

Kafka does not fsync its partition logs on each write (``log.flush.interval.messages`` is
unbounded by default: durability comes from replication), so a SIGKILL loses nothing a machine
crash would: the page cache survives the process. This filesystem passes every call through to
a backing directory and remembers, per file changed since it was last fsynced, the length it
had then. The ``lose`` command (written to the control file) truncates every such file back to
that length, as a power loss would; the broker must be dead first (``Cluster.lose_unsynced``).

What it models and what it does not (say so wherever its results are reported):
- appends after the last ``fsync``/``fdatasync`` (or ``msync``) of a file are lost; a file
  created and never fsynced comes back empty. Kafka's segments are append-only, so this is the
  loss that matters for its logs (the KRaft metadata log is fsynced before it is acknowledged).
- overwrites in place inside the synced length, truncations, renames and deletions are kept
  (treated as durable). Kafka rewrites in place only its mmapped index files, which recovery
  after an unclean shutdown rebuilds, and writes its checkpoints by fsync + rename.

Run as ``python -m kafka_chaos.clusters.lossyfs BACKING_DIR MOUNTPOINT`` (foreground; unmount with
``fusermount3 -u``). Control: the file ``CONTROL`` at the mount root (hidden from listings):
write ``lose`` (drop unsynced data), ``sync`` (take every current length as synced, e.g.
after formatting), or a disk fault (``Lossy.disk``: ``full``, ``free``, ``slow <ms>``,
``fast``); read it for the last report as JSON ``{"files": {path: [synced_bytes,
lost_bytes]}, "lost_bytes": int, "full": bool, "slow_ms": int, "refused": int, "delayed":
int}``. Built on mfusepy (a maintained fusepy fork, libfuse 3).
"""

from __future__ import annotations

import errno
import json
import os
import sys
import threading
import time
from typing import Callable

#: The control file's name at the mount root.
CONTROL = ".kafka-chaos-lossyfs"
_CONTROL_PATH = "/" + CONTROL
_CONTROL_FH = 2**31 - 1  # a handle no os.open returns here


class Lossy:
    """The per-file synced lengths and the loss itself, apart from FUSE (unit-testable).

    ``backing`` is the directory holding the real files; paths are mount-relative
    (``"/a/b.log"``). Thread-safe: FUSE calls arrive on several threads.
    """

    def __init__(self, backing: str) -> None:
        self.backing = os.path.realpath(backing)
        self._synced: dict[str, int] = {}  # files changed since their last fsync -> length then
        self._lock = threading.Lock()
        self.report: dict = {"files": {}, "lost_bytes": 0}
        #: the disk is full: a write that grows a file fails with ENOSPC
        self.full = False
        #: seconds each write and fsync waits first: a slow disk
        self.delay_s = 0.0
        #: since the fault was set: writes refused with ENOSPC, writes and fsyncs delayed
        self.refused = self.delayed = 0

    def disk(self, command: str) -> None:
        """``full`` (writes that grow a file fail with ENOSPC, as on a full disk: the blocks
        it has stay writable), ``free``, ``slow <ms>`` (each write and fsync waits that long
        first) or ``fast``. Raises ``ValueError`` for another command."""
        what, _, arg = command.partition(" ")
        if what in ("full", "free"):
            if what == "full" and not self.full:
                self.refused = 0
            self.full = what == "full"
        elif what == "slow" and arg.isdigit():
            if not self.delay_s:
                self.delayed = 0
            self.delay_s = int(arg) / 1000
        elif what == "fast" and not arg:
            self.delay_s = 0.0
        else:
            raise ValueError(f"unknown disk command {command!r}")

    def disk_state(self) -> dict:
        """``{"full": bool, "slow_ms": int, "refused": n, "delayed": n}``: what ``disk`` set,
        and how many writes the full disk refused and how many writes and fsyncs the slow
        disk delayed since each fault was last set (kept after it ends: what it did)."""
        return {"full": self.full, "slow_ms": round(self.delay_s * 1000),
                "refused": self.refused, "delayed": self.delayed}

    def wait(self) -> None:
        """Wait as a slow disk does before a write or fsync (nothing when it is fast)."""
        if delay := self.delay_s:
            with self._lock:
                self.delayed += 1
            time.sleep(delay)

    def write_allowed(self, end: int, size: Callable[[], int]) -> None:
        """Wait as a slow disk does, then raise ``OSError`` ENOSPC when the disk is full and a
        write up to byte ``end`` would grow the file (``size``: its length now, asked only
        then)."""
        self.wait()
        if self.full and end > size():
            with self._lock:
                self.refused += 1
            raise OSError(errno.ENOSPC, "No space left on device (lossyfs: full)")

    def real(self, path: str) -> str:
        """The backing path of mount-relative ``path``."""
        return os.path.join(self.backing, path.lstrip("/"))

    def created(self, path: str) -> None:
        """A new file: nothing of it is synced yet."""
        with self._lock:
            self._synced[path] = 0

    def before_write(self, path: str, size_now: int | Callable[[], int]) -> None:
        """First change since the last fsync: remember the length the file had (bytes;
        ``size_now`` may be a callable, asked only then: one fstat per file between fsyncs,
        not one per write)."""
        with self._lock:
            if path not in self._synced:
                self._synced[path] = size_now() if callable(size_now) else size_now

    def truncated(self, path: str, length: int) -> None:
        """A truncation is kept; what was synced beyond ``length`` is gone anyway."""
        with self._lock:
            if path in self._synced:
                self._synced[path] = min(self._synced[path], length)

    def fsynced(self, path: str) -> None:
        """``path`` reached the disk: nothing of it can be lost any more."""
        with self._lock:
            self._synced.pop(path, None)

    def renamed(self, old: str, new: str) -> None:
        """A file or directory moved (kept, as durable): its record, and those under it, too."""
        with self._lock:
            moved = {p: n for p, n in self._synced.items() if p == old or p.startswith(old + "/")}
            for p in list(self._synced):
                if p == new or p.startswith(new + "/"):
                    del self._synced[p]
            for p, n in moved.items():
                del self._synced[p]
                self._synced[new + p[len(old):]] = n

    def removed(self, path: str) -> None:
        """A file deleted: nothing of it to lose."""
        with self._lock:
            self._synced.pop(path, None)

    def sync_all(self) -> None:
        """Take every file's current length as synced."""
        with self._lock:
            self._synced.clear()

    def lose(self) -> dict:
        """Truncate every file changed since its last fsync to its synced length; returns and
        keeps the report ``{"files": {path: [synced, lost]}, "lost_bytes": n}``."""
        files, total = {}, 0
        with self._lock:
            for path, synced in sorted(self._synced.items()):
                real = self.real(path)
                try:
                    size = os.path.getsize(real)
                    if size > synced:
                        os.truncate(real, synced)
                        files[path] = [synced, size - synced]
                        total += size - synced
                except FileNotFoundError:
                    continue
            self._synced.clear()
        self.report = {"files": files, "lost_bytes": total}
        return self.report


def operations(backing: str):
    """The mfusepy ``Operations`` passing calls through to ``backing`` and feeding ``Lossy``."""
    import mfusepy as fuse

    lossy = Lossy(backing)

    def oserror(call):
        def wrapped(*args):
            try:
                return call(*args)
            except OSError as exc:
                raise fuse.FuseOSError(exc.errno or errno.EIO) from None
        wrapped.__name__ = call.__name__
        return wrapped

    class Ops(fuse.Operations):
        use_ns = True

        @oserror
        def getattr(self, path, fh=None):
            if path == _CONTROL_PATH:
                return {"st_mode": 0o100600, "st_nlink": 1, "st_size": len(self._report())}
            st = os.lstat(lossy.real(path))
            return {k: getattr(st, k) for k in (
                "st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime_ns",
                "st_mtime_ns", "st_ctime_ns", "st_ino", "st_blocks")} | {
                    "st_atime": st.st_atime_ns, "st_mtime": st.st_mtime_ns,
                    "st_ctime": st.st_ctime_ns}

        def _report(self) -> bytes:
            return json.dumps({**lossy.report, **lossy.disk_state()}).encode()

        @oserror
        def readdir(self, path, fh):
            return [".", ".."] + [n for n in os.listdir(lossy.real(path))
                                  if not (path == "/" and n == CONTROL)]

        @oserror
        def access(self, path, amode):
            if path != _CONTROL_PATH and not os.access(lossy.real(path), amode):
                raise OSError(errno.EACCES, "access")
            return 0

        @oserror
        def mkdir(self, path, mode):
            return os.mkdir(lossy.real(path), mode)

        @oserror
        def rmdir(self, path):
            return os.rmdir(lossy.real(path))

        @oserror
        def unlink(self, path):
            os.unlink(lossy.real(path))
            lossy.removed(path)
            return 0

        @oserror
        def rename(self, old, new):
            os.rename(lossy.real(old), lossy.real(new))
            lossy.renamed(old, new)
            return 0

        @oserror
        def link(self, target, source):
            return os.link(lossy.real(source), lossy.real(target))

        @oserror
        def symlink(self, target, source):
            return os.symlink(source, lossy.real(target))

        @oserror
        def readlink(self, path):
            return os.readlink(lossy.real(path))

        @oserror
        def chmod(self, path, mode):
            return os.chmod(lossy.real(path), mode)

        @oserror
        def chown(self, path, uid, gid):
            return os.chown(lossy.real(path), uid, gid)

        @oserror
        def utimens(self, path, times=None):
            return os.utime(lossy.real(path), ns=times) if times else os.utime(lossy.real(path))

        @oserror
        def statfs(self, path):
            st = os.statvfs(lossy.real(path))
            return {k: getattr(st, k) for k in (
                "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files",
                "f_flag", "f_frsize", "f_namemax")}

        @oserror
        def create(self, path, mode, fi=None):
            # read-write whatever was asked: mmap writeback may read through this handle
            fd = os.open(lossy.real(path), os.O_RDWR | os.O_CREAT | os.O_EXCL, mode)
            lossy.created(path)
            return fd

        @oserror
        def open(self, path, flags):
            if path == _CONTROL_PATH:
                return _CONTROL_FH
            if flags & os.O_TRUNC:
                lossy.before_write(path, os.path.getsize(lossy.real(path)))
            return os.open(lossy.real(path), flags & ~os.O_APPEND)

        @oserror
        def read(self, path, size, offset, fh):
            if fh == _CONTROL_FH:
                return self._report()[offset:offset + size]
            return os.pread(fh, size, offset)

        @oserror
        def write(self, path, data, offset, fh):
            if fh == _CONTROL_FH:
                command = bytes(data).decode(errors="replace").strip()
                if command == "lose":
                    lossy.lose()
                elif command == "sync":
                    lossy.sync_all()
                else:
                    try:
                        lossy.disk(command)
                    except ValueError:
                        raise OSError(errno.EINVAL, command) from None
                return len(data)
            lossy.write_allowed(offset + len(data), lambda: os.fstat(fh).st_size)
            lossy.before_write(path, lambda: os.fstat(fh).st_size)
            return os.pwrite(fh, data, offset)

        @oserror
        def truncate(self, path, length, fh=None):
            if path == _CONTROL_PATH:
                return 0
            if fh is not None:
                os.ftruncate(fh, length)
            else:
                os.truncate(lossy.real(path), length)
            lossy.truncated(path, length)
            return 0

        @oserror
        def fallocate(self, path, mode, offset, size, fh):
            lossy.write_allowed(offset + size, lambda: os.fstat(fh).st_size)
            lossy.before_write(path, os.fstat(fh).st_size)
            os.posix_fallocate(fh, offset, size)
            return 0

        def flush(self, path, fh):
            return 0

        @oserror
        def release(self, path, fh):
            if fh != _CONTROL_FH:
                os.close(fh)
            return 0

        @oserror
        def fsync(self, path, datasync, fh):
            if fh != _CONTROL_FH:
                lossy.wait()
                # the backing file need not reach the disk: only our record of it matters
                lossy.fsynced(path)
            return 0

        def fsyncdir(self, path, datasync, fh):
            return 0

    return Ops(), lossy


def main(argv: list[str]) -> int:
    """``lossyfs BACKING_DIR MOUNTPOINT``: mount in the foreground until unmounted."""
    import mfusepy as fuse

    if len(argv) != 2:
        print("usage: python -m kafka_chaos.clusters.lossyfs BACKING_DIR MOUNTPOINT", file=sys.stderr)
        return 2
    backing, mountpoint = argv
    ops, _ = operations(backing)
    # no attribute or entry caching: after a loss the kernel must see the shorter files
    fuse.FUSE(ops, mountpoint, foreground=True, nothreads=False, attr_timeout=0,
              entry_timeout=0, negative_timeout=0, fsname="kafka-chaos-lossyfs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
