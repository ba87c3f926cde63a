"""A minimal OAuth 2 identity provider for tests: ``/token`` grants client credentials
(RFC 6749 §4.4, HTTP Basic) a JWT signed with RS256, ``/jwks`` publishes the public key
(RFC 7517), as a broker's ``OAuthBearerValidatorCallbackHandler`` (KIP-768) fetches it."""

from __future__ import annotations

import base64
import http.server
import json
import threading
import time

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

KID = "kafka-chaos-test"
#: The tokens' audience (``aud``), which brokers of Kafka 4.x require to be configured.
AUDIENCE = "kafka"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _uint(n: int) -> str:
    return _b64(n.to_bytes((n.bit_length() + 7) // 8, "big"))


class IdentityProvider:
    """Serves on 127.0.0.1 (``url``); client ``client_id`` with ``secret`` gets tokens for
    ``subject``; ``issued`` counts them. ``stop`` ends it."""

    def __init__(self, client_id: str, secret: str, subject: str) -> None:
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.client_id, self.secret, self.subject, self.issued = client_id, secret, subject, 0
        provider = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._send(200, provider.jwks())

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                basic = base64.b64encode(f"{provider.client_id}:{provider.secret}".encode())
                if self.headers.get("Authorization") != f"Basic {basic.decode()}":
                    self._send(401, {"error": "invalid_client"})
                    return
                provider.issued += 1
                self._send(200, {"access_token": provider.token(), "token_type": "Bearer",
                                 "expires_in": 600})

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def jwks(self) -> dict:
        """The public key set."""
        pub = self.key.public_key().public_numbers()
        return {"keys": [{"kty": "RSA", "kid": KID, "use": "sig", "alg": "RS256",
                          "n": _uint(pub.n), "e": _uint(pub.e)}]}

    def token(self) -> str:
        """A JWT for ``subject`` and ``AUDIENCE``, issued by ``url``, valid for 10 minutes,
        signed RS256."""
        now = int(time.time())
        head = _b64(json.dumps({"alg": "RS256", "typ": "JWT", "kid": KID}).encode())
        claims = _b64(json.dumps({"sub": self.subject, "iat": now, "exp": now + 600,
                                  "scope": "kafka", "aud": AUDIENCE, "iss": self.url}).encode())
        signature = self.key.sign(f"{head}.{claims}".encode(), padding.PKCS1v15(),
                                  hashes.SHA256())
        return f"{head}.{claims}.{_b64(signature)}"

    def stop(self) -> None:
        self.server.shutdown()
