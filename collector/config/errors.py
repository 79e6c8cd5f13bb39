"""What a wrong configuration raises, and the check every listening address goes through."""

from __future__ import annotations

import re


class ConfigError(ValueError):
    """The configuration is wrong; the message says which key and what to do."""


_ENDPOINT = re.compile(r"^(?P<host>\[[0-9a-fA-F:]+\]|[^:\s]*):(?P<port>\d{1,5})$")


def parse_endpoint(value: str, key: str) -> tuple[str, int]:
    """Split "HOST:PORT" (or ":PORT", which means all interfaces) and check the port."""
    match = _ENDPOINT.match(value.strip())
    if not match:
        raise ConfigError(f"{key}: expected HOST:PORT (for example 127.0.0.1:4317), got {value!r}")
    port = int(match["port"])
    if port > 65535:
        raise ConfigError(f"{key}: port {port} is out of range (0-65535)")
    host = match["host"].strip("[]") or "0.0.0.0"
    return host, port
