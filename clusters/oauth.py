"""SASL/OAUTHBEARER for the tool's own protocol requests (``clusters.wire``), with the tokens
librdkafka gets from the same client properties:

- ``sasl.oauthbearer.method=oidc``: an access token from the token endpoint
  (``sasl.oauthbearer.token.endpoint.url``) by the OAuth 2 client-credentials grant
  (RFC 6749 §4.4: ``sasl.oauthbearer.client.id`` and ``.client.secret`` as HTTP Basic
  authentication, ``sasl.oauthbearer.scope``), kept until 30 s before it expires: the
  monitor connects to every node every 500 ms;
- else an unsecured JWT (``alg: none``, RFC 7519 §6) built from
  ``sasl.oauthbearer.config`` (``principal=NAME [scope=A,B] [scopeClaimName=scope]
  [lifeSeconds=3600] [extension_KEY=VALUE]``), as librdkafka builds it with
  ``enable.sasl.oauthbearer.unsecure.jwt=true``: for brokers that run Kafka's unsecured
  validator (tests, development clusters).

The client's first message is RFC 7628's: ``n,,`` ``\\x01auth=Bearer <token>`` then each
SASL extension ``\\x01key=value`` (KIP-342), ending in ``\\x01\\x01``.
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from kafka_chaos.clusters.security import ClientSecurity
from kafka_chaos.errors import OAuthError

#: Seconds before a token's expiry when it is fetched anew.
MARGIN_S = 30.0
_TOKENS: dict[tuple, tuple[str, float]] = {}
_LOCK = threading.Lock()


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _config(text: str) -> dict[str, str]:
    """``sasl.oauthbearer.config``'s ``key=value`` words."""
    return dict(word.split("=", 1) for word in text.split() if "=" in word)


def unsecured_jwt(config: str, now: float | None = None) -> str:
    """The unsecured JWT of ``sasl.oauthbearer.config`` (``principal=...``, see the module
    doc): header ``{"alg": "none"}``, claims ``sub``, ``iat``, ``exp`` and the scope claim,
    an empty signature. Raises ``OAuthError`` without ``principal``."""
    c = _config(config)
    if "principal" not in c:
        raise OAuthError("sasl.oauthbearer.config names no principal=")
    now = time.time() if now is None else now
    claims: dict = {"sub": c["principal"], "iat": int(now),
                    "exp": int(now + float(c.get("lifeSeconds", 3600)))}
    if "scope" in c:
        claims[c.get("scopeClaimName", "scope")] = c["scope"].split(",")
    return f"{_b64({'alg': 'none'})}.{_b64(claims)}."


def extensions(security: ClientSecurity) -> dict[str, str]:
    """SASL extensions (KIP-342): ``extension_KEY=VALUE`` of ``sasl.oauthbearer.config``, or
    ``sasl.oauthbearer.extensions`` (``KEY=VALUE,...``) with the oidc method."""
    s = security.settings
    if s.get("sasl.oauthbearer.method", "default").lower() == "oidc":
        pairs = [p.split("=", 1) for p in s.get("sasl.oauthbearer.extensions", "").split(",")
                 if "=" in p]
        return {k.strip(): v.strip() for k, v in pairs}
    return {k[len("extension_"):]: v
            for k, v in _config(s.get("sasl.oauthbearer.config", "")).items()
            if k.startswith("extension_")}


def fetch_token(security: ClientSecurity, timeout_s: float = 10.0) -> str:
    """An access token for ``security`` (oidc: from the token endpoint, cached; else the
    unsecured JWT). Raises ``OAuthError`` naming the endpoint and its answer (never the
    client secret)."""
    s = security.settings
    if s.get("sasl.oauthbearer.method", "default").lower() != "oidc":
        return unsecured_jwt(s.get("sasl.oauthbearer.config", ""))
    key = tuple(sorted(s.items()))
    with _LOCK:
        cached = _TOKENS.get(key)
        if cached and cached[1] - MARGIN_S > time.monotonic():
            return cached[0]
        url = s["sasl.oauthbearer.token.endpoint.url"]
        form = {"grant_type": "client_credentials"}
        if s.get("sasl.oauthbearer.scope"):
            form["scope"] = s["sasl.oauthbearer.scope"]
        basic = base64.b64encode(f"{s['sasl.oauthbearer.client.id']}:"
                                 f"{s['sasl.oauthbearer.client.secret']}".encode()).decode()
        request = urllib.request.Request(
            url, data=urllib.parse.urlencode(form).encode(), method="POST",
            headers={"Authorization": f"Basic {basic}",
                     "Content-Type": "application/x-www-form-urlencoded"})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as reply:
                answer = json.loads(reply.read())
        except urllib.error.HTTPError as exc:
            raise OAuthError(f"token endpoint {url}: HTTP {exc.code}: "
                             f"{exc.read()[:300].decode(errors='replace')}") from None
        except (OSError, ValueError) as exc:
            raise OAuthError(f"token endpoint {url}: {exc}") from None
        if "access_token" not in answer:
            raise OAuthError(f"token endpoint {url} answered no access_token")
        life = float(answer.get("expires_in", 300))
        _TOKENS[key] = (answer["access_token"], time.monotonic() + life)
        return answer["access_token"]


def initial_response(security: ClientSecurity) -> bytes:
    """The client's first (and only) SASL/OAUTHBEARER message (RFC 7628 §3.1)."""
    parts = [f"auth=Bearer {fetch_token(security)}",
             *(f"{k}={v}" for k, v in extensions(security).items())]
    return ("n,," + "".join(f"\x01{p}" for p in parts) + "\x01\x01").encode()
