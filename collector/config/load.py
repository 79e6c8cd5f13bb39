"""Loading the configuration: the defaults with a YAML file applied on top, command-line
flags applied on top of that (`apply_overrides`), and the example file with every default."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from mast_otel.collector.config.errors import ConfigError
from mast_otel.collector.config.root import Config


def _merge(instance: Any, values: dict[str, Any], path: str) -> Any:
    """Build a copy of dataclass `instance` with `values` applied, rejecting unknown keys."""
    if not isinstance(values, dict):
        raise ConfigError(f"{path or 'config'}: expected a mapping, got {type(values).__name__}")
    fields = {f.name: f for f in dataclasses.fields(instance)}
    changes: dict[str, Any] = {}
    for key, value in values.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in fields:
            known = ", ".join(sorted(fields))
            raise ConfigError(f"{where}: unknown option (known here: {known})")
        current = getattr(instance, key)
        if dataclasses.is_dataclass(current):
            changes[key] = _merge(current, value, where)
        else:
            changes[key] = _coerce(current, value, where)
    return dataclasses.replace(instance, **changes)


def _coerce(current: Any, value: Any, where: str) -> Any:
    if isinstance(current, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if isinstance(current, int) and not isinstance(current, bool):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected a whole number, got {value!r}")
        return value
    if isinstance(current, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if isinstance(current, str):
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    if isinstance(current, dict):
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(x, str) for x in v)
            for k, v in value.items()
        ):
            raise ConfigError(f"{where}: expected a mapping of names to lists of strings")
        return value
    if isinstance(current, list | tuple):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
        return type(current)(value)
    return value


def load_config(path: str | Path | None = None) -> Config:
    """The defaults, with the YAML file at `path` applied on top (if given), validated."""
    config = Config()
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from exc
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from exc
        config = _merge(config, data, "")
    config.validate()
    return config


def apply_overrides(config: Config, overrides: dict[str, Any]) -> Config:
    """Apply dotted-key overrides (from command-line flags) and validate again."""
    nested: dict[str, Any] = {}
    for dotted, value in overrides.items():
        if value is None:
            continue
        cursor = nested
        *parents, leaf = dotted.split(".")
        for part in parents:
            cursor = cursor.setdefault(part, {})
        cursor[leaf] = value
    updated: Config = _merge(config, nested, "")
    updated.validate()
    return updated


EXAMPLE_HEADER = (
    "# mast-otel configuration with every option at its default.\n"
    "# Copy it, keep what you change; `mast-otel serve --config FILE` reads it, flags override "
    "it.\n"
)


def example_yaml() -> str:
    """Every option at its default, as YAML (deploy/config.example.yaml is this)."""
    return EXAMPLE_HEADER + yaml.safe_dump(dataclasses.asdict(Config()), sort_keys=False, width=200)


def on_free_loopback_ports(config: Config, data_dir: str | Path | None = None) -> Config:
    """The same config with both receivers on free loopback ports (and, if given, another
    store directory): for the demo, which must not collide with a running `serve`, and tests."""
    receivers = dataclasses.replace(
        config.receivers,
        grpc=dataclasses.replace(config.receivers.grpc, endpoint="127.0.0.1:0"),
        http=dataclasses.replace(config.receivers.http, endpoint="127.0.0.1:0"),
    )
    config = dataclasses.replace(config, receivers=receivers)
    if data_dir is not None:
        storage = dataclasses.replace(config.storage, data_dir=str(data_dir))
        config = dataclasses.replace(config, storage=storage)
    return config
