"""The configuration reference (deploy/CONFIGURATION.md) is generated from the config classes
and up to date, explains every option, and the example configuration of each deployment shape
(deploy/examples/) loads and says what that shape needs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from mast_otel.collector import config_reference
from mast_otel.collector.config import Config, load_config, parse_endpoint
from tests.deploy_checks import needs_clickhouse_backend

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "deploy" / "examples"


def all_keys(instance: object, prefix: str = "") -> list[str]:
    keys = []
    for f in dataclasses.fields(instance):  # type: ignore[arg-type]
        value = getattr(instance, f.name)
        key = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(value):
            keys += all_keys(value, key + ".")
        else:
            keys.append(key)
    return keys


def test_configuration_reference_is_up_to_date() -> None:
    written = (ROOT / config_reference.OUTPUT).read_text()
    assert written == config_reference.render(), (
        f"deploy/CONFIGURATION.md is stale: run `{config_reference.COMMAND}`"
    )


def test_every_option_is_in_the_reference_with_its_default_and_an_explanation() -> None:
    assert config_reference.undocumented() == []
    text = config_reference.render()
    for key in all_keys(Config()):
        assert f"| `{key}` |" in text, key


def test_comments_are_read_from_the_source() -> None:
    comments = config_reference.field_comments(type(Config().receivers.grpc))
    assert comments["endpoint"].startswith("Loopback by default")
    assert "RESOURCE_EXHAUSTED" in comments["max_message_bytes"]
    sections = {s.key: s for s in config_reference.sections()}
    assert sections["sharding"].description.startswith("One replica among several")
    option = next(o for o in sections["sharding"].options if o.key.endswith("merge_split_runs"))
    assert option.default is False and "whole trace" in option.description


def load_example(name: str) -> Config:
    return load_config(EXAMPLES / name)


def test_there_is_an_example_per_deployment_shape() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.yaml")) == [
        "cluster.yaml",
        "server.yaml",
        "single-binary.yaml",
    ]


def test_single_binary_keeps_to_loopback_and_the_embedded_store() -> None:
    config = load_example("single-binary.yaml")
    assert parse_endpoint(config.receivers.grpc.endpoint, "grpc")[0] == "127.0.0.1"
    assert config.storage.backend == "chdb"
    assert config.sharding.merge_split_runs is False


@needs_clickhouse_backend
@pytest.mark.parametrize("name", ["server.yaml", "cluster.yaml"])
def test_server_shapes_listen_on_all_interfaces_and_write_to_clickhouse(name: str) -> None:
    config = load_example(name)
    assert parse_endpoint(config.receivers.grpc.endpoint, "grpc")[0] == "0.0.0.0"
    assert parse_endpoint(config.receivers.http.endpoint, "http")[0] == "0.0.0.0"
    assert config.storage.backend == "clickhouse"


@needs_clickhouse_backend
def test_cluster_replicas_merge_runs_split_across_them() -> None:
    config = load_example("cluster.yaml")
    assert config.sharding.merge_split_runs is True
    assert config.windows.idle_timeout_s < Config().windows.idle_timeout_s
    assert config.storage.cluster
