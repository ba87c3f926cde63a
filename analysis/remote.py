"""Run directories on storage a Spark cluster reads (``hdfs://``, ``s3a://``, ``gs://``, ...),
through the Hadoop ``FileSystem`` API of the analysis's own Spark session.

Executors on other hosts read a history's columnar copy by its URL; the driver reads here the
few small files it needs (the copy's ``meta.json``, the fingerprint of ``history.jsonl``) and
copies a run directory there (``kafka-chaos publish``) or its files back (the report). Going
through Spark's JVM means one configuration for both: the ``hdfs://`` client is in pyspark's
own Hadoop jars; other schemes need their connector jars and settings given to Spark
(``spark.jars.packages``, ``spark.hadoop.fs.s3a.*``; ``docs/spark-cluster.md``), which the
executors need anyway.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from kafka_chaos.analysis.spark import is_connect
from kafka_chaos.errors import RemoteError

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def is_url(location: Any) -> bool:
    """``location`` is a ``scheme://...`` string (a ``Path`` never is)."""
    return isinstance(location, str) and bool(_URL.match(location))


def join(url: str, *names: str) -> str:
    """``url`` with ``names`` appended as path components."""
    return "/".join([url.rstrip("/"), *names])


class Remote:
    """The Hadoop file system of one URL, with the session's Hadoop configuration (so
    ``spark.hadoop.*`` settings apply: credentials, endpoints)."""

    def __init__(self, spark: SparkSession, url: str) -> None:
        if is_connect(spark):
            raise RemoteError(f"{url}: a Spark Connect session has no Hadoop client in this "
                              "process: analyse a URL with a local or spark:// master")
        self.spark = spark
        self._jvm = spark.sparkContext._jvm
        self._conf = spark.sparkContext._jsc.hadoopConfiguration()
        self._call(self._open_fs, url)

    def _open_fs(self, url: str) -> None:
        self.fs = self._jvm.org.apache.hadoop.fs.Path(url).getFileSystem(self._conf)

    def _path(self, location: str | Path) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(str(location))

    def _local(self, path: Path) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(Path(path).resolve().as_uri())

    @staticmethod
    def _call(fn, url: str, *args):
        from py4j.protocol import Py4JJavaError

        try:
            return fn(url, *args)
        except Py4JJavaError as exc:
            java = exc.java_exception
            raise RemoteError(f"{url}: {java.getClass().getName()}: "
                              f"{str(java.getMessage())[:300]}") from None

    def exists(self, url: str) -> bool:
        """Something (file or directory) is at ``url``."""
        return self._call(lambda u: bool(self.fs.exists(self._path(u))), url)

    def size(self, url: str) -> int:
        """Length of the file at ``url``, bytes."""
        return self._call(lambda u: int(self.fs.getFileStatus(self._path(u)).getLen()), url)

    def read(self, url: str, start: int = 0, length: int | None = None) -> bytes:
        """``length`` bytes (default: to the end) of the file at ``url`` from byte ``start``.
        For small reads: the bytes cross Py4J (about 13 MB/s measured)."""
        def read(u: str) -> bytes:
            stream = self.fs.open(self._path(u))
            try:
                if start:
                    stream.seek(start)
                return bytes(stream.readNBytes(length if length is not None else 2**31 - 1))
            finally:
                stream.close()
        return self._call(read, url)

    def get(self, url: str, local: Path) -> None:
        """Copy the file or directory at ``url`` to the local path ``local`` (no ``.crc``
        files)."""
        self._call(lambda u: self.fs.copyToLocalFile(False, self._path(u), self._local(local),
                                                     True), url)

    def put(self, local: Path, url: str) -> None:
        """Copy the local file or directory ``local`` to ``url``, which must not exist."""
        self._call(lambda u: self.fs.copyFromLocalFile(False, False, self._local(local),
                                                       self._path(u)), url)

    def mkdirs(self, url: str) -> None:
        """Make the directory ``url`` and its parents."""
        self._call(lambda u: self.fs.mkdirs(self._path(u)), url)

    def rename(self, src: str, dst: str) -> None:
        """Rename ``src`` to ``dst`` (atomic on HDFS; a copy on object stores). Raises
        ``RemoteError`` when the file system refuses."""
        if not self._call(lambda u: bool(self.fs.rename(self._path(u), self._path(dst))), src):
            raise RemoteError(f"{src}: could not be renamed to {dst}")

    def delete(self, url: str) -> None:
        """Delete ``url`` recursively; nothing there is no error."""
        self._call(lambda u: self.fs.delete(self._path(u), True), url)


def copy_url(history_url: str) -> str:
    """Where the columnar copy of the history at ``history_url`` is: ``.../history.parquet``
    (``history.columnar.copy_dir``)."""
    parent, _, name = history_url.rstrip("/").rpartition("/")
    return join(parent, name.rsplit(".", 1)[0] + ".parquet")


def current_copy(spark: SparkSession, history_url: str) -> tuple[dict[str, str], dict]:
    """The tables (name -> URL) and ``meta.json`` of the columnar copy of the history at
    ``history_url``, when that copy is complete and was made from the file as it is there
    (its fingerprint, ``history.columnar.fingerprint``). A copy is never made remotely:
    ``kafka-chaos publish`` copies a current one.

    Raises:
        HistoryError: no history there, or no complete and current copy (names the URL).
        RemoteError: the file system cannot be reached or read.
    """
    from kafka_chaos.history import HistoryError, columnar

    remote = Remote(spark, history_url)
    if not remote.exists(history_url):
        raise HistoryError(f"{history_url}: not found")
    copy = copy_url(history_url)
    meta_url = join(copy, "meta.json")
    try:
        meta = json.loads(remote.read(meta_url)) if remote.exists(meta_url) else None
    except ValueError:
        meta = None
    if not isinstance(meta, dict) or meta.get("layout") != columnar.LAYOUT:
        raise HistoryError(f"{copy}: no complete columnar copy of the history (meta.json of "
                           f"layout {columnar.LAYOUT}): publish the run directory with "
                           "kafka-chaos publish")
    size = remote.size(history_url)
    span = columnar.FINGERPRINT_BYTES
    head = remote.read(history_url, 0, min(size, span))
    tail = remote.read(history_url, max(0, size - span), min(size, span))
    if meta.get("jsonl") != columnar.fingerprint_of(size, head, tail):
        raise HistoryError(f"{copy} was not made from {history_url} as it is now: publish "
                           "the run directory again")
    return {t: join(copy, f"{t}.parquet") for t in columnar.TABLES}, meta


def temp_name(url: str) -> str:
    """A hidden sibling of ``url`` for a copy renamed into place once complete."""
    parent, _, name = url.rstrip("/").rpartition("/")
    return f"{parent}/.{name}.{os.getpid()}.tmp"
