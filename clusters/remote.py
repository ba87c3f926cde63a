"""One SSH connection to one inventory host (paramiko): commands from argv lists, files by SFTP.

Host keys are checked against the host's ``known_hosts`` file (OpenSSH format, ``[host]:port``
for ports other than 22), plus keys accepted earlier in the same cluster's life (kept in the
backend's state file, so ``cluster down`` after a crash checks the same keys). An unknown key is
refused unless the user opted in, and then it is logged; a changed key is always refused.
Commands are built with ``shlex.join``/``shlex.quote`` only.
"""

from __future__ import annotations

import base64
import logging
import shlex
import socket
import stat
import threading
from pathlib import Path

import paramiko

from kafka_chaos.clusters.base import ExecResult, FileAccess
from kafka_chaos.clusters.inventory import SshHost
from kafka_chaos.errors import SshError

log = logging.getLogger("kafka_chaos.ssh")

CONNECT_TIMEOUT_S = 10.0


class _Policy(paramiko.MissingHostKeyPolicy):
    """Refuse an unknown host key, or (opt-in) accept it, log it and remember it."""

    def __init__(self, accept: bool) -> None:
        self.accept = accept
        self.accepted: str | None = None

    def missing_host_key(self, client, hostname, key) -> None:
        if not self.accept:
            raise SshError(
                f"host key of {hostname} ({key.get_name()} {key.fingerprint}) is not in "
                "known_hosts: add it (ssh-keyscan, after checking the fingerprint) or pass "
                "--accept-unknown-host-keys")
        log.warning("accepting unknown host key of %s: %s %s (--accept-unknown-host-keys)",
                    hostname, key.get_name(), key.fingerprint)
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.accepted = f"{key.get_name()} {key.get_base64()}"


class Remote:
    """A connected host. Thread-safe: each command is its own SSH channel; SFTP is locked.

    Args:
        host: the inventory entry.
        accept_unknown: accept (and log) a host key that ``known_hosts`` lacks.
        known_key: ``"<type> <base64>"`` accepted for this host before (state file), or None.
    Raises:
        SshError: unreachable, authentication refused, unknown or changed host key.
    """

    def __init__(self, host: SshHost, accept_unknown: bool = False,
                 known_key: str | None = None) -> None:
        self.host = host
        self._policy = _Policy(accept_unknown)
        self._known_key = known_key
        self._lock = threading.Lock()
        self._sftp: paramiko.SFTPClient | None = None
        self._client = self._connect()

    @property
    def label(self) -> str:
        """``user@host:port``, for messages."""
        return f"{self.host.user}@{self.host.host}:{self.host.port}"

    @property
    def accepted_key(self) -> str | None:
        """The host key accepted on opt-in (``"<type> <base64>"``), or the one given."""
        return self._policy.accepted or self._known_key

    def _connect(self) -> paramiko.SSHClient:
        h = self.host
        client = paramiko.SSHClient()
        keys = client.get_host_keys()  # not load_host_keys: never write the user's file
        if Path(h.known_hosts).is_file():
            keys.load(h.known_hosts)
        if self._known_key:
            kind, b64 = self._known_key.split(" ", 1)
            name = h.host if h.port == 22 else f"[{h.host}]:{h.port}"
            keys.add(name, kind, paramiko.PKey.from_type_string(kind, base64.b64decode(b64)))
        client.set_missing_host_key_policy(self._policy)
        try:
            client.connect(h.host, port=h.port, username=h.user, key_filename=h.key_file,
                           look_for_keys=h.key_file is None, allow_agent=h.key_file is None,
                           timeout=CONNECT_TIMEOUT_S, banner_timeout=CONNECT_TIMEOUT_S,
                           auth_timeout=CONNECT_TIMEOUT_S)
        except paramiko.BadHostKeyException as exc:
            raise SshError(
                f"host key of {h.host} CHANGED: known_hosts has {exc.expected_key.get_name()} "
                f"{exc.expected_key.fingerprint}, the server offers "
                f"{exc.key.get_name()} {exc.key.fingerprint}; refusing to connect (if the "
                f"change is expected: ssh-keygen -R {h.host})") from None
        except paramiko.AuthenticationException as exc:
            raise SshError(f"{self.label}: authentication failed ({exc}): check user and "
                           "key_file in the inventory") from None
        except (OSError, paramiko.SSHException) as exc:
            if isinstance(exc, SshError):
                raise
            raise SshError(f"{self.label}: cannot connect: {exc}") from None
        return client

    def _transport(self) -> paramiko.Transport:
        transport = self._client.get_transport()
        if transport is None or not transport.is_active():
            self._client = self._connect()
            self._sftp = None
            transport = self._client.get_transport()
        return transport

    def run(self, argv: list[str], sudo: bool = False, timeout_s: float = 30.0) -> ExecResult:
        """Run ``argv`` (quoted with ``shlex.join``) on the host; with ``sudo``, as root via
        ``sudo -n``. A command still running after ``timeout_s`` gives exit 124."""
        argv = ["sudo", "-n", "--", *argv] if sudo else argv
        return self._exec(shlex.join(argv), timeout_s)

    def script(self, text: str, sudo: bool = False, timeout_s: float = 30.0) -> ExecResult:
        """Run a ``sh`` script the backend wrote (every user value in it ``shlex.quote``d)."""
        return self.run(["sh", "-c", text], sudo=sudo, timeout_s=timeout_s)

    def _exec(self, command: str, timeout_s: float) -> ExecResult:
        try:
            chan = self._transport().open_session(timeout=CONNECT_TIMEOUT_S)
        except (OSError, paramiko.SSHException) as exc:
            raise SshError(f"{self.label}: cannot open a channel: {exc}") from None
        chan.settimeout(timeout_s)
        out, err = bytearray(), bytearray()
        try:
            chan.exec_command(command)
            stdout, stderr = chan.makefile("rb"), chan.makefile_stderr("rb")
            out += stdout.read()
            err += stderr.read()
            code = chan.recv_exit_status()
        except socket.timeout:
            return ExecResult(124, out.decode(errors="replace"),
                              f"timed out after {timeout_s} s on {self.host.host}")
        finally:
            chan.close()
        return ExecResult(code, out.decode(errors="replace"), err.decode(errors="replace"))

    def sftp(self) -> paramiko.SFTPClient:
        """The host's SFTP session (opened on first use). Hold ``self.lock`` while using it."""
        if self._sftp is None:
            try:
                self._sftp = paramiko.SFTPClient.from_transport(self._transport())
            except (OSError, paramiko.SSHException) as exc:
                raise SshError(f"{self.label}: no SFTP (is the sftp subsystem enabled in "
                               f"sshd_config?): {exc}") from None
        return self._sftp

    @property
    def lock(self) -> threading.Lock:
        """Serialises SFTP use (a paramiko SFTPClient is not safe across threads)."""
        return self._lock

    def put_text(self, text: str, remote_path: str) -> None:
        """Write ``text`` to ``remote_path`` (replaced atomically)."""
        with self.lock:
            sftp = self.sftp()
            tmp = remote_path + ".tmp"
            with sftp.open(tmp, "w") as f:
                f.write(text)
            sftp.posix_rename(tmp, remote_path)

    def put_files(self, files: list[Path], remote_dir: str) -> int:
        """Copy ``files`` into ``remote_dir`` unless a file of the same name and size is there
        (an earlier upload); each lands under a temporary name first. Returns bytes sent."""
        sent = 0
        with self.lock:
            sftp = self.sftp()
            present = {a.filename: a.st_size for a in sftp.listdir_attr(remote_dir)}
            for f in files:
                size = f.stat().st_size
                if present.get(f.name) == size:
                    continue
                tmp = f"{remote_dir}/.{f.name}.part"
                sftp.put(str(f), tmp)
                sftp.posix_rename(tmp, f"{remote_dir}/{f.name}")
                sent += size
        return sent

    def get(self, remote_path: str, local_path: Path) -> bool:
        """Copy ``remote_path`` to ``local_path``; False if the remote file does not exist."""
        with self.lock:
            try:
                self.sftp().get(remote_path, str(local_path))
                return True
            except FileNotFoundError:
                return False

    def close(self) -> None:
        """Close SFTP and the connection (idempotent)."""
        if self._sftp is not None:
            self._sftp.close()
        self._client.close()


class SftpFiles(FileAccess):
    """The files of ``remote``'s host, over its SFTP session (``Remote.lock`` held for each
    call). SFTP has no fsync: a change is followed by ``sync FILE`` (GNU coreutils) on the
    host, whose failure is an ``OSError`` as SFTP's own errors are."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote

    def listdir(self, path: str) -> list[str]:
        with self.remote.lock:
            try:
                found = self.remote.sftp().listdir_attr(path)
            except FileNotFoundError:
                return []
        return sorted(a.filename for a in found if stat.S_ISREG(a.st_mode or 0))

    def size(self, path: str) -> int | None:
        with self.remote.lock:
            try:
                attr = self.remote.sftp().stat(path)
            except FileNotFoundError:
                return None
        return attr.st_size if stat.S_ISREG(attr.st_mode or 0) else None

    def read(self, path: str) -> bytes:
        with self.remote.lock, self.remote.sftp().open(path, "rb") as fh:
            fh.prefetch()
            return fh.read()

    def write_at(self, path: str, offset: int, data: bytes) -> None:
        with self.remote.lock, self.remote.sftp().open(path, "r+b") as fh:
            fh.seek(offset)
            fh.write(data)
        self._sync(path)

    def truncate(self, path: str, length: int) -> None:
        with self.remote.lock:
            self.remote.sftp().truncate(path, length)
        self._sync(path)

    def _sync(self, path: str) -> None:
        res = self.remote.run(["sync", "--", path])
        if res.exit != 0:
            raise OSError(f"{self.remote.label}: sync {path} failed: "
                          f"{(res.err or res.out).strip()}")
