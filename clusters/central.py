"""What Maven Central serves of Kafka (``org.apache.kafka:kafka_2.13``), and what Maven said
when it could not fetch a version, each in one line for ``dist.resolve``'s errors.

The list of versions is Central's ``maven-metadata.xml``, read over HTTPS (about 0.1 s), so
that a version Central lacks is refused before Maven starts (about 2 s), with the versions
nearest to it.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Iterable

from kafka_chaos.clusters.errors import DistributionError

#: Maven's built-in ``central``. A mirror of it in settings.xml is not read: when this URL
#: cannot be reached, mvn alone decides (``dist.resolve``).
CENTRAL = "https://repo.maven.apache.org/maven2"
METADATA = f"{CENTRAL}/org/apache/kafka/kafka_2.13/maven-metadata.xml"

_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: the frames of mvn's message around its cause
_FRAMES = re.compile(r"(Failed to execute goal on project|Could not resolve dependencies for "
                     r"project|Failed to collect dependencies at|Failed to read artifact "
                     r"descriptor for) \S+: ")
#: mvn's cause for an artifact its repository does not have (fresh, or remembered from an
#: earlier attempt)
_NOT_FOUND = re.compile(r"Could not find artifact (\S+)|(\S+) was not found in")
#: ... and for a repository it could not reach: its id, URL and the innermost cause
_TRANSFER = re.compile(r"from/to (\S+) \(([^)]*)\): (?:transfer failed for \S+: )?(.*)")


def _triple(version: str) -> tuple[int, int, int]:
    major, minor, patch = _RELEASE.fullmatch(version).groups()
    return int(major), int(minor), int(patch)


def versions(metadata: bytes | str) -> list[str]:
    """The release versions (``MAJOR.MINOR.PATCH``, no ``-rc1``) listed in a
    ``maven-metadata.xml``, oldest first. Raises ``DistributionError`` when it is not XML."""
    try:
        root = ET.fromstring(metadata)
    except ET.ParseError as exc:
        raise DistributionError(f"{METADATA}: not a Maven metadata file ({exc})") from None
    listed = {v.text.strip() for v in root.iter("version") if v.text}
    return sorted((v for v in listed if _RELEASE.fullmatch(v)), key=_triple)


def fetch_versions(timeout_s: float = 3.0) -> list[str]:
    """``versions`` of Central's metadata of ``kafka_2.13``, oldest first. Raises
    ``DistributionError`` (one line, naming the URL) when it cannot be read within about
    ``timeout_s`` seconds per connection step (no network, a proxy, HTTP errors)."""
    import http.client  # only when a version is missing from the cache
    import urllib.request

    try:
        with urllib.request.urlopen(METADATA, timeout=timeout_s) as response:
            return versions(response.read())
    except (OSError, http.client.HTTPException) as exc:  # URLError, HTTPError, a timeout
        reason = getattr(exc, "reason", None) or exc
        raise DistributionError(f"{METADATA} could not be read: {reason}") from None


def nearest(version: str, served: Iterable[str], n: int = 3) -> list[str]:
    """At most ``n`` versions of ``served`` closest to ``version`` (``MAJOR.MINOR.PATCH``),
    closest first, ``version`` itself and non-releases left out. Closeness is along the
    release line: a minor apart outweighs any number of patches and a major any number of
    minors, so those of its MAJOR.MINOR come first; the newer first on a tie."""
    asked = _triple(version)

    def key(v: str) -> tuple[int, list[int]]:
        t = _triple(v)
        return abs(_scalar(t) - _scalar(asked)), [-x for x in t]

    releases = {v for v in served if _RELEASE.fullmatch(v) and _triple(v) != asked}
    return sorted(releases, key=key)[:n]


def _scalar(t: tuple[int, int, int]) -> int:
    return (t[0] * 10**6 + t[1]) * 10**6 + t[2]


def unknown(version: str, served: Iterable[str] | None) -> str:
    """The one-line error for a ``version`` Central does not serve, naming the nearest of
    ``served`` (None: its list could not be read)."""
    if served is None:
        return (f"--kafka-version {version}: Maven Central has no Kafka {version} (its list "
                "of versions, to name the nearest, could not be read)")
    close = ", ".join(nearest(version, served)) or "none"
    return (f"--kafka-version {version}: Maven Central has no Kafka {version}; nearest "
            f"served: {close} (kafka-chaos fetch-kafka --list shows all)")


def mvn_failure(version: str, output: str, served: Iterable[str] | None) -> str:
    """The one-line error for mvn's failed fetch of Kafka ``version``, from its ``output``
    (stdout and stderr, colour codes and all): ``unknown`` when it found no
    ``kafka_2.13:<version>``, the repository and the cause when it could not reach one, else
    its first ``[ERROR]`` line."""
    lines = [_ANSI.sub("", line).strip() for line in output.splitlines()]
    errors = [line.removeprefix("[ERROR]").strip() for line in lines
              if line.startswith("[ERROR]")]
    cause = next((e for e in errors if e), "").removesuffix("-> [Help 1]").strip()
    cause = _FRAMES.sub("", cause)
    missing = _NOT_FOUND.match(cause)
    if missing and (missing[1] or missing[2]) == f"org.apache.kafka:kafka_2.13:jar:{version}":
        return unknown(version, served)
    transfer = _TRANSFER.search(cause)
    if transfer:
        repo, url, reason = transfer.groups()
        return f"--kafka-version {version}: Maven could not reach {repo} ({url}): {reason}"
    shown = cause[:300] or next((line[:300] for line in reversed(lines) if line), "no output")
    return f"--kafka-version {version}: mvn could not fetch Kafka {version}: {shown}"
