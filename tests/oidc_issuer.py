"""A local OIDC issuer for tests: signing keys made here with ``cryptography`` (RSA and P-256), their JWKS
served over HTTP on 127.0.0.1, and tokens signed with them (PyJWT), plus the forged ones an attacker
would send (``alg: none``, HS256 keyed with the public key, a tampered payload)."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

AUDIENCE = "troupe-tests"


class SigningKey:
    def __init__(self, kid: str, alg: str) -> None:
        self.kid, self.alg = kid, alg
        self.private: Any = (
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
            if alg.startswith("RS")
            else ec.generate_private_key(ec.SECP256R1())
        )

    def jwk(self) -> dict[str, Any]:
        algorithm = jwt.algorithms.RSAAlgorithm if self.alg.startswith("RS") else jwt.algorithms.ECAlgorithm
        found: dict[str, Any] = json.loads(algorithm.to_jwk(self.private.public_key()))
        return {**found, "kid": self.kid, "alg": self.alg, "use": "sig"}

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class Issuer:
    """``issuer.url`` is the ``iss``; ``issuer.jwks_url`` serves the current keys (``publish`` swaps them)."""

    def __init__(self) -> None:
        self.keys = {k.kid: k for k in (SigningKey("rsa-1", "RS256"), SigningKey("ec-1", "ES256"))}
        self.published = list(self.keys)
        self.fetches = 0
        # Cleared: a fetch is held unanswered until it is set again (an issuer that stopped answering).
        self.answering = threading.Event()
        self.answering.set()
        self.holding = threading.Event()  # set once a fetch is held
        # "slow": the answer comes a byte at a time, each within any timeout; "fast": it never ends.
        self.dripping: str | None = None
        self.stopped = threading.Event()
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.fetches += 1
                if not issuer.answering.is_set():
                    issuer.holding.set()
                    issuer.answering.wait()
                if issuer.dripping:
                    self._drip()
                    return
                body = json.dumps({"keys": [issuer.keys[k].jwk() for k in issuer.published]}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _drip(self) -> None:
                """The start of a JWKS, then a space at a time, for as long as the reader reads."""
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                with contextlib.suppress(OSError):
                    self.wfile.write(b'{"keys": [')
                    while issuer.dripping:
                        self.wfile.write(b" " * 65536 if issuer.dripping == "fast" else b" ")
                        self.wfile.flush()
                        if issuer.dripping != "fast":
                            issuer.stopped.wait(0.2)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.jwks_url = self.url + "/jwks"
        threading.Thread(target=self._server.serve_forever, daemon=True, name="oidc-issuer").start()

    def stop(self) -> None:
        self.dripping = None
        self.stopped.set()
        self.answering.set()
        self._server.shutdown()
        self._server.server_close()

    def rotate(self) -> SigningKey:
        """A new RSA key, published in place of the old ones."""
        fresh = SigningKey(f"rsa-{len(self.keys) + 1}", "RS256")
        self.keys[fresh.kid] = fresh
        self.published = [fresh.kid]
        return fresh

    def claims(self, sub: str, **extra: Any) -> dict[str, Any]:
        now = int(time.time())
        return {"iss": self.url, "aud": AUDIENCE, "sub": sub, "iat": now, "exp": now + 300, **extra}

    def token(self, sub: str, kid: str = "rsa-1", **extra: Any) -> str:
        key = self.keys[kid]
        return jwt.encode(self.claims(sub, **extra), key.private, algorithm=key.alg, headers={"kid": kid})

    # ---- forgeries -------------------------------------------------------------------------------------

    def unsigned(self, sub: str, **extra: Any) -> str:
        header = _b64(json.dumps({"alg": "none", "typ": "JWT", "kid": "rsa-1"}).encode())
        return f"{header}.{_b64(json.dumps(self.claims(sub, **extra)).encode())}."

    def hmac_with_public_key(self, sub: str, **extra: Any) -> str:
        """HS256 keyed with the RSA public key's PEM: what a verifier that lets the token pick the
        algorithm would accept."""
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}).encode())
        payload = _b64(json.dumps(self.claims(sub, **extra)).encode())
        mac = hmac.new(self.keys["rsa-1"].public_pem(), f"{header}.{payload}".encode(), hashlib.sha256)
        return f"{header}.{payload}.{_b64(mac.digest())}"

    def tampered(self, sub: str, **changes: Any) -> str:
        """A genuine token whose payload was changed after signing."""
        header, _, signature = self.token(sub).split(".")
        payload = _b64(json.dumps(self.claims(sub, **changes)).encode())
        return f"{header}.{payload}.{signature}"
