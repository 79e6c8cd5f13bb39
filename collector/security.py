"""Authentication and TLS for the receivers.

Senders authenticate with a bearer token (`Authorization: Bearer TOKEN`, as the OpenTelemetry
SDK exporters send with `headers=`/`OTEL_EXPORTER_OTLP_HEADERS`). The token comes from a file
(`security.auth.token_file`) or the `MAST_AUTH_TOKEN` environment variable, never from the
configuration itself, and is never logged. Tokens are compared in constant time.

TLS uses PEM files; with a client CA the receivers require client certificates (mutual TLS).
Both are off by default, which suits a collector listening on loopback only.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
import ssl
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from mast_otel.collector.config import AuthConfig, ConfigError, TlsConfig

AUTH_TOKEN_ENV = "MAST_AUTH_TOKEN"
UNAUTHENTICATED_MESSAGE = "missing or wrong bearer token (send Authorization: Bearer TOKEN)"


def load_token(config: AuthConfig, environ: Mapping[str, str] | None = None) -> str | None:
    """The bearer token senders must present, or None when authentication is off."""
    environ = os.environ if environ is None else environ
    if config.token_file:
        try:
            token = Path(config.token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ConfigError(
                f"security.auth.token_file: cannot read {config.token_file}: {exc.strerror}"
            ) from exc
        if not token:
            raise ConfigError(f"security.auth.token_file: {config.token_file} is empty")
        return token
    token = environ.get(AUTH_TOKEN_ENV, "").strip()
    return token or None


def bearer_matches(header: str | None, token: str) -> bool:
    """Whether an Authorization header value carries `token` (constant-time comparison).

    Accepted, exactly: the scheme `Bearer` in any case, one space, then the token, with
    nothing around it but the spaces and tabs HTTP strips from every field value (RFC 9110
    section 5.5), on both transports alike. Two spaces, another scheme or another token are
    refused."""
    if not header:
        return False
    scheme, sep, value = header.strip(" \t").partition(" ")
    if not sep or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.encode("utf-8"), token.encode("utf-8"))


def _read(path: str, key: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc.strerror}") from exc


def server_ssl_context(tls: TlsConfig) -> ssl.SSLContext | None:
    """The HTTP receiver's TLS context, or None when TLS is off."""
    if not tls.cert_file:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(tls.cert_file, tls.key_file)
        if tls.client_ca_file:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cafile=tls.client_ca_file)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(f"security.tls: cannot load the certificate files: {exc}") from exc
    return context


def grpc_server_credentials(tls: TlsConfig) -> grpc.ServerCredentials | None:
    """The gRPC receiver's TLS credentials, or None when TLS is off."""
    if not tls.cert_file:
        return None
    key = _read(tls.key_file, "security.tls.key_file")
    cert = _read(tls.cert_file, "security.tls.cert_file")
    client_ca = (
        _read(tls.client_ca_file, "security.tls.client_ca_file") if tls.client_ca_file else None
    )
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


class BearerTokenInterceptor(grpc.aio.ServerInterceptor):
    """Refuses every RPC without the bearer token with UNAUTHENTICATED, before any handler
    runs and before the request is even read: the refusal is a coroutine on the server's
    event loop, so unauthenticated callers hold no worker thread, however many they are.

    An `authorization` key sent more than once is refused (HTTP refuses a repeated
    Authorization header the same way)."""

    def __init__(self, token: str, on_refused: Callable[[], None] = lambda: None) -> None:
        self._token = token
        self._on_refused = on_refused
        self._deny = grpc.stream_unary_rpc_method_handler(self._abort)

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        values = [
            value if isinstance(value, str) else value.decode("latin-1")
            for key, value in handler_call_details.invocation_metadata or ()
            if key == "authorization"
        ]
        if len(values) == 1 and bearer_matches(values[0], self._token):
            return await continuation(handler_call_details)
        self._on_refused()
        return self._deny

    @staticmethod
    async def _abort(request_iterator: Any, context: grpc.aio.ServicerContext) -> None:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, UNAUTHENTICATED_MESSAGE)


def is_loopback(host: str) -> bool:
    """Whether a listening host is reachable from this machine only."""
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
