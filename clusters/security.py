"""How the tool's clients reach a cluster that asks for TLS or SASL: the client properties
file users already keep for Kafka's tools (``--command-config``) and librdkafka.

    security.protocol=SASL_SSL
    sasl.mechanism=SCRAM-SHA-512
    sasl.username=chaos
    sasl.password=${env:KAFKA_PASSWORD}
    ssl.ca.location=/etc/kafka/ca.pem

Keys are librdkafka's (``CONFIGURATION.md``), with the Java client's names for the same
settings accepted (``sasl.mechanisms``/``sasl.mechanism``; ``ssl.truststore.location`` is
not: librdkafka reads PEM files). A value may name a secret instead of holding it, in the
syntax of Kafka's config providers (KIP-297, KIP-421): ``${env:NAME}`` (an environment
variable, ``EnvVarConfigProvider``), ``${file:PATH:KEY}`` (a key of a properties file,
``FileConfigProvider``), ``${dir:DIR:NAME}`` (a file's content, ``DirectoryConfigProvider``).
Resolved values live in memory only: the run keeps the file's path, never a secret
(``ClientSecurity.describe`` is what logs and reports may show).
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from kafka_chaos.errors import SecurityError

#: ``security.protocol`` values (librdkafka and the Java client spell them alike).
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: SASL mechanisms the tool's own protocol requests speak (``clusters/wire.py``); librdkafka
#: speaks these too.
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
#: Settings that hold secrets: never shown, never written.
SECRETS = frozenset({"sasl.password", "ssl.key.password", "sasl.oauthbearer.client.secret"})
#: OAUTHBEARER's settings (librdkafka's names; ``clusters.oauth``).
OAUTHBEARER_KEYS = frozenset({
    "sasl.oauthbearer.method", "sasl.oauthbearer.config",
    "enable.sasl.oauthbearer.unsecure.jwt", "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.secret", "sasl.oauthbearer.token.endpoint.url",
    "sasl.oauthbearer.scope", "sasl.oauthbearer.extensions"})
#: The settings a client properties file may hold, librdkafka's names; the Java client's
#: spelling of the same setting -> librdkafka's.
KEYS = frozenset({"security.protocol", "sasl.mechanism", "sasl.username", "sasl.password",
                  "ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
                  "ssl.key.password", "ssl.endpoint.identification.algorithm"}
                 | OAUTHBEARER_KEYS)
JAVA_NAMES = {"sasl.mechanisms": "sasl.mechanism"}
_REFERENCE = re.compile(r"\$\{(env|file|dir):([^}]*)\}")


@dataclasses.dataclass(frozen=True)
class ClientSecurity:
    """The resolved settings (librdkafka names -> values) of one client properties file, or
    none (``PLAINTEXT``). ``source`` is the file, for messages."""

    settings: dict[str, str] = dataclasses.field(default_factory=dict)
    source: str | None = None

    @property
    def protocol(self) -> str:
        """``security.protocol`` (``PLAINTEXT`` when unset)."""
        return self.settings.get("security.protocol", "PLAINTEXT")

    @property
    def tls(self) -> bool:
        """Whether connections are TLS (``SSL``, ``SASL_SSL``)."""
        return self.protocol.endswith("SSL")

    @property
    def sasl(self) -> str | None:
        """The SASL mechanism, or None without SASL."""
        return self.settings.get("sasl.mechanism") if self.protocol.startswith("SASL") \
            else None

    def librdkafka(self) -> dict[str, str]:
        """The settings to merge into every librdkafka client's configuration."""
        return dict(self.settings)

    def java(self) -> dict[str, str]:
        """The same settings for the Java client (kafka-clients), to merge into every
        producer's and consumer's configuration of ``--client java``.

        SASL goes into ``sasl.jaas.config``: ``PlainLoginModule`` or ``ScramLoginModule``
        with the username and password, or ``OAuthBearerLoginModule`` with an unsecured token
        for librdkafka's ``principal=`` (Kafka's ``OAuthBearerUnsecuredLoginCallbackHandler``,
        the client's default). TLS takes PEM (KIP-651): the CA file as a PEM trust store, the
        client certificate and key as a PEM key store's content (the key must be PKCS#8, as
        Java reads it); librdkafka's ``ssl.endpoint.identification.algorithm=none`` is
        Java's empty value. OAUTHBEARER through an OIDC token endpoint becomes Kafka's
        ``OAuthBearerLoginCallbackHandler`` (KIP-768: the client-credentials grant) with the
        client id, secret, scope and extensions in the JAAS options; the JVM must also allow
        the endpoint (``java_system``).
        """
        s = self.settings
        out = {"security.protocol": self.protocol}
        mechanism = self.sasl
        if mechanism is not None:
            out["sasl.mechanism"] = mechanism
            out["sasl.jaas.config"] = self._jaas(mechanism)
            if self._oidc():
                out["sasl.login.callback.handler.class"] = _OIDC_HANDLER
                out["sasl.oauthbearer.token.endpoint.url"] = \
                    s["sasl.oauthbearer.token.endpoint.url"]
        if self.tls:
            if "ssl.ca.location" in s:
                out.update({"ssl.truststore.type": "PEM",
                            "ssl.truststore.location": s["ssl.ca.location"]})
            if "ssl.certificate.location" in s:
                out.update({"ssl.keystore.type": "PEM",
                            "ssl.keystore.certificate.chain":
                                Path(s["ssl.certificate.location"]).read_text(),
                            "ssl.keystore.key": Path(s["ssl.key.location"]).read_text()})
                if "ssl.key.password" in s:
                    out["ssl.key.password"] = s["ssl.key.password"]
            algorithm = s.get("ssl.endpoint.identification.algorithm")
            if algorithm is not None:
                out["ssl.endpoint.identification.algorithm"] = \
                    "" if algorithm.lower() == "none" else algorithm
        return out

    def java_system(self) -> dict[str, str]:
        """JVM system properties ``--client java`` needs: the OIDC token endpoint in
        ``org.apache.kafka.sasl.oauthbearer.allowed.urls``, without which kafka-clients 4.0+
        refuses to call it (the allow list that came with the fix of CVE-2025-27817); else
        none."""
        if not self._oidc():
            return {}
        return {"org.apache.kafka.sasl.oauthbearer.allowed.urls":
                self.settings["sasl.oauthbearer.token.endpoint.url"]}

    def _oidc(self) -> bool:
        return (self.sasl == "OAUTHBEARER"
                and self.settings.get("sasl.oauthbearer.method", "default").lower() == "oidc")

    def _jaas(self, mechanism: str) -> str:
        s = self.settings
        if mechanism == "OAUTHBEARER":
            login = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required"
            if self._oidc():
                options = [f"clientId={_quoted(s['sasl.oauthbearer.client.id'])}",
                           f"clientSecret={_quoted(s['sasl.oauthbearer.client.secret'])}"]
                if s.get("sasl.oauthbearer.scope"):
                    options.append(f"scope={_quoted(s['sasl.oauthbearer.scope'])}")
                for pair in filter(None, s.get("sasl.oauthbearer.extensions", "").split(",")):
                    key, _, value = pair.partition("=")
                    options.append(f"extension_{key.strip()}={_quoted(value.strip())}")
                return f"{login} {' '.join(options)};"
            config = dict(part.split("=", 1) for part in
                          s.get("sasl.oauthbearer.config", "").split() if "=" in part)
            return f"{login} unsecuredLoginStringClaim_sub={_quoted(config['principal'])};"
        module = ("org.apache.kafka.common.security.plain.PlainLoginModule"
                  if mechanism == "PLAIN"
                  else "org.apache.kafka.common.security.scram.ScramLoginModule")
        return (f"{module} required username={_quoted(s['sasl.username'])} "
                f"password={_quoted(s['sasl.password'])};")

    def describe(self) -> dict[str, str]:
        """The settings as logs, ``config.json`` and reports may show them: secrets replaced
        by ``[hidden]``."""
        return {k: "[hidden]" if k in SECRETS else v for k, v in self.settings.items()}


#: kafka-clients' login handler for OIDC tokens (KIP-768; this package since Kafka 3.4)
_OIDC_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


def _quoted(value: str) -> str:
    """A JAAS option value: quoted, with backslashes and quotes escaped (Kafka's
    ``JaasConfig`` parses it with ``StreamTokenizer``)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def load(path: Path, environ: dict[str, str] | None = None) -> ClientSecurity:
    """Read and check the client properties file ``path`` (``key=value`` or ``key: value``
    lines, ``#`` and ``!`` comments, as ``java.util.Properties`` reads simple files),
    resolving config provider references against ``environ`` (default ``os.environ``).

    Raises ``SecurityError`` naming the file, line and key: an unknown key, a protocol or
    mechanism not in ``PROTOCOLS``/``MECHANISMS``, SASL without username and password, a
    reference to a variable, file or key that does not exist, a TLS file that cannot be read.
    """
    environ = os.environ if environ is None else environ
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise SecurityError(f"{path}: {exc.strerror or exc}") from None
    settings: dict[str, str] = {}
    where: dict[str, int] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = _split(line)
        if not sep:
            raise SecurityError(f"{path}:{number}: {line!r} is no key=value")
        key = JAVA_NAMES.get(key, key)
        if key not in KEYS:
            raise SecurityError(f"{path}:{number}: {key}: not a client security setting; "
                                f"choose from {', '.join(sorted(KEYS))}")
        settings[key] = _resolve(value, environ, f"{path}:{number}: {key}")
        where[key] = number
    _check(settings, where, path)
    return ClientSecurity(settings, str(path))


def _split(line: str) -> tuple[str, str, str]:
    """``key=value`` or ``key: value`` (the first separator), both sides stripped."""
    m = re.match(r"([^=:\s]+)\s*([=:])\s*(.*)", line)
    return (m[1], m[2], m[3].strip()) if m else (line, "", "")


def _resolve(value: str, environ: dict[str, str], where: str) -> str:
    """``value`` with each config provider reference replaced (KIP-297 syntax)."""
    def one(m: re.Match) -> str:
        provider, arg = m[1], m[2]
        if provider == "env":
            name = arg.lstrip(":")  # ${env:NAME}, and Kafka's ${env::NAME} too
            if name not in environ:
                raise SecurityError(f"{where}: environment variable {name} is not set")
            return environ[name]
        file, sep, key = arg.rpartition(":")
        if not sep:
            raise SecurityError(f"{where}: ${{{provider}:...}} needs PATH:KEY")
        try:
            if provider == "dir":
                return (Path(file) / key).read_text().strip()
            found = {k: v for k, s, v in map(_split, Path(file).read_text().splitlines()) if s}
        except OSError as exc:
            raise SecurityError(f"{where}: {exc.filename or file}: {exc.strerror}") from None
        if key not in found:
            raise SecurityError(f"{where}: {file} has no key {key}")
        return found[key]
    return _REFERENCE.sub(one, value)


def _check(settings: dict[str, str], where: dict[str, int], path: Path) -> None:
    def fail(key: str, message: str) -> SecurityError:
        line = f":{where[key]}" if key in where else ""
        return SecurityError(f"{path}{line}: {key}: {message}")

    protocol = settings.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise fail("security.protocol", f"{protocol!r}: choose from {', '.join(PROTOCOLS)}")
    if "security.protocol" in settings:
        settings["security.protocol"] = protocol
    if protocol.startswith("SASL"):
        mechanism = settings.get("sasl.mechanism", "")
        if mechanism not in MECHANISMS:
            raise fail("sasl.mechanism", f"{mechanism!r}: choose from {', '.join(MECHANISMS)}")
        if mechanism == "OAUTHBEARER":
            _check_oauthbearer(settings, fail)
        else:
            for key in ("sasl.username", "sasl.password"):
                if not settings.get(key):
                    raise fail(key, f"{protocol} with {mechanism} needs it")
    for key in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location"):
        if key in settings and not os.access(settings[key], os.R_OK):
            raise fail(key, f"{settings[key]} cannot be read")
    if ("ssl.certificate.location" in settings) != ("ssl.key.location" in settings):
        raise fail("ssl.certificate.location" if "ssl.key.location" in settings
                   else "ssl.key.location", "a client certificate needs its key, and back")


def _check_oauthbearer(settings: dict[str, str], fail) -> None:
    """OAUTHBEARER needs a way to a token that both librdkafka and ``clusters.oauth`` take:
    ``sasl.oauthbearer.method=oidc`` with a client id, secret and token endpoint, or an
    unsecured token (``sasl.oauthbearer.config=principal=...`` with
    ``enable.sasl.oauthbearer.unsecure.jwt=true``, librdkafka's switch for it)."""
    method = settings.get("sasl.oauthbearer.method", "default").lower()
    if method == "oidc":
        for key in ("sasl.oauthbearer.client.id", "sasl.oauthbearer.client.secret",
                    "sasl.oauthbearer.token.endpoint.url"):
            if not settings.get(key):
                raise fail(key, "sasl.oauthbearer.method=oidc needs it")
        return
    if method != "default":
        raise fail("sasl.oauthbearer.method", f"{method!r}: choose default or oidc")
    if "principal=" not in settings.get("sasl.oauthbearer.config", ""):
        raise fail("sasl.oauthbearer.config", "OAUTHBEARER without oidc needs "
                   "principal=NAME (an unsecured token; or set sasl.oauthbearer.method=oidc)")
    if settings.get("enable.sasl.oauthbearer.unsecure.jwt", "").lower() != "true":
        raise fail("enable.sasl.oauthbearer.unsecure.jwt", "must be true for an unsecured "
                   "token (librdkafka builds none without it)")
