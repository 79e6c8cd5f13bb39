"""`security`: bearer-token authentication and TLS on both receivers."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AuthConfig:
    """Bearer-token authentication of every request on both receivers."""

    # A file holding the bearer token senders must present (Authorization: Bearer TOKEN).
    # Without it the token comes from the MAST_AUTH_TOKEN environment variable; with neither,
    # requests are not authenticated (fine on loopback, not on a network).
    token_file: str = ""
    # GET /healthz without a token (for probes that cannot send one); off: it needs one too.
    health_open: bool = False


@dataclass
class TlsConfig:
    """TLS (and mutual TLS) on both receivers."""

    # PEM files. Both set: the receivers speak TLS only.
    cert_file: str = ""
    # The private key of cert_file (PEM).
    key_file: str = ""
    # Set: mutual TLS, clients must present a certificate signed by this CA.
    client_ca_file: str = ""


@dataclass
class SecurityConfig:
    """Who may send, and over what: off by default, which suits loopback endpoints."""

    auth: AuthConfig = field(default_factory=AuthConfig)
    tls: TlsConfig = field(default_factory=TlsConfig)
