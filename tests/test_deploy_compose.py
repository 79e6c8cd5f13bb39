"""The compose stack (deploy/compose/), checked with what runs here: the Compose
specification's own parser, the real `promtool` on the Prometheus configuration, mast-otel's
configuration loader and command-line parser on what the containers are given, and every
cross-reference between the files (what one names, another must define). No Docker engine
runs here, so the stack itself is not started (README, Deploy)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from compose_spec import PyCompose

from mast_otel.collector.cli import build_parser
from mast_otel.collector.config import load_config, parse_endpoint
from tests.deploy_checks import (
    check_otelcol_config,
    loadbalancing_exporters,
    needs_clickhouse_backend,
    pipelines_exporting_to,
)

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_DIR = ROOT / "deploy" / "compose"
COMPOSE_FILE = COMPOSE_DIR / "compose.yaml"


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text())
    return data


def service(name: str) -> dict[str, Any]:
    found: dict[str, Any] = compose()["services"][name]
    return found


def bind_mounts(name: str) -> dict[str, Path]:
    """Container path → host path of a service's bind mounts (relative to the compose file)."""
    mounts = {}
    for volume in service(name).get("volumes", []):
        source, target, *_ = volume.split(":")
        if source.startswith("."):
            mounts[target] = (COMPOSE_DIR / source).resolve()
    return mounts


def mounted_config(name: str, target: str) -> Path:
    path = bind_mounts(name)[target]
    assert path.is_file(), f"{name} mounts {path}, which does not exist"
    return path


def test_compose_file_is_valid_compose_specification() -> None:
    parsed = PyCompose.from_yaml(COMPOSE_FILE.read_text())
    assert set(parsed.service_names()) == {
        "clickhouse",
        "mast-otel",
        "otelcol",
        "prometheus",
        "grafana",
        "demo-agent",
    }


def test_references_between_services_volumes_and_files_resolve() -> None:
    data = compose()
    services = data["services"]
    named_volumes = set(data.get("volumes", {}))
    for name, spec in services.items():
        for dependency, condition in spec.get("depends_on", {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            if condition["condition"] == "service_healthy":
                # mast-otel's health check is the image's HEALTHCHECK.
                assert "healthcheck" in services[dependency] or dependency == "mast-otel"
        for volume in spec.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (COMPOSE_DIR / source).exists(), f"{name}: {source} does not exist"
            else:
                assert source in named_volumes, f"{name}: volume {source} is not declared"
    build = services["mast-otel"]["build"]
    assert (COMPOSE_DIR / build["context"] / build["dockerfile"]).resolve() == (
        ROOT / "deploy" / "Dockerfile"
    )
    # The demo agent runs the image the replicas are built into.
    assert services["demo-agent"]["image"] == services["mast-otel"]["image"]


def replica_yaml() -> dict[str, Any]:
    """The replicas' configuration as written (for the ports and names other files use)."""
    path = mounted_config("mast-otel", "/etc/mast-otel/config.yaml")
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def replica_port(receiver: str) -> int:
    return parse_endpoint(replica_yaml()["receivers"][receiver]["endpoint"], receiver)[1]


def replica_config() -> Any:
    """The replicas' configuration as mast-otel loads and validates it."""
    return load_config(mounted_config("mast-otel", "/etc/mast-otel/config.yaml"))


@needs_clickhouse_backend
def test_replicas_listen_on_all_interfaces_share_clickhouse_and_merge_split_runs() -> None:
    config = replica_config()
    assert parse_endpoint(config.receivers.grpc.endpoint, "grpc")[0] == "0.0.0.0"
    assert parse_endpoint(config.receivers.http.endpoint, "http")[0] == "0.0.0.0"
    assert config.storage.backend == "clickhouse"
    assert config.sharding.merge_split_runs is True
    assert config.storage.database == service("clickhouse")["environment"]["CLICKHOUSE_DB"]
    assert service("mast-otel")["deploy"]["replicas"] >= 2


def test_replica_command_line_is_one_mast_otel_accepts() -> None:
    args = build_parser().parse_args(service("mast-otel")["command"])
    assert args.command == "serve"
    assert args.config == "/etc/mast-otel/config.yaml"


@needs_clickhouse_backend
def test_replicas_reach_clickhouse_with_the_password_from_a_secret() -> None:
    server = replica_config().storage.clickhouse
    assert server.url == "http://clickhouse:8123"
    clickhouse = service("clickhouse")["environment"]
    assert server.username == clickhouse["CLICKHOUSE_USER"]
    (secret,) = service("mast-otel")["secrets"]
    assert server.password_file == f"/run/secrets/{secret}"
    # The secret and the server's password come from the same variable.
    assert compose()["secrets"][secret] == {"environment": "CLICKHOUSE_PASSWORD"}
    assert clickhouse["CLICKHOUSE_PASSWORD"].startswith("${CLICKHOUSE_PASSWORD")


def test_load_balancer_routes_by_trace_id_to_the_replicas_dns_name() -> None:
    path = mounted_config("otelcol", "/etc/otelcol-contrib/config.yaml")
    config = yaml.safe_load(path.read_text())
    assert check_otelcol_config(config) == []
    (exporter,) = loadbalancing_exporters(config)
    assert exporter["routing_key"] == "traceID"
    dns = exporter["resolver"]["dns"]
    # A compose service name resolves to all of its replicas' addresses.
    assert dns["hostname"] == "mast-otel"
    assert int(dns["port"]) == replica_port("grpc")
    assert pipelines_exporting_to(config, "loadbalancing") == {"traces", "logs"}
    receivers = config["receivers"]["otlp"]["protocols"]
    assert receivers["grpc"]["endpoint"] == "0.0.0.0:4317"
    assert receivers["http"]["endpoint"] == "0.0.0.0:4318"
    assert {"4317:4317", "4318:4318"} <= set(service("otelcol")["ports"])


def test_demo_agent_sends_to_the_load_balancer() -> None:
    args = build_parser().parse_args(service("demo-agent")["command"])
    assert args.command == "demo" and args.loop
    host, port = parse_endpoint(args.endpoint, "--endpoint")
    assert host == "otelcol"
    config = yaml.safe_load(
        mounted_config("otelcol", "/etc/otelcol-contrib/config.yaml").read_text()
    )
    listen = config["receivers"]["otlp"]["protocols"][args.transport]["endpoint"]
    assert parse_endpoint(listen, "otelcol")[1] == port


def test_prometheus_config_passes_promtool_and_scrapes_every_replica(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    assert promtool, "promtool comes from Debian's prometheus package (scripts/system-deps.sh)"
    mounts = bind_mounts("prometheus")
    config = yaml.safe_load(mounts["/etc/prometheus/prometheus.yml"].read_text())
    # The rule file as the container sees it, through its mount.
    config["rule_files"] = [str(mounts[path]) for path in config["rule_files"]]
    local = tmp_path / "prometheus.yml"
    local.write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [promtool, "check", "config", str(local)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (job,) = config["scrape_configs"]
    (sd,) = job["dns_sd_configs"]
    assert sd["names"] == ["mast-otel"]
    assert sd["port"] == replica_port("http")
    assert job.get("metrics_path", "/metrics") == "/metrics"


def grafana_provisioning() -> dict[Path, Any]:
    root = bind_mounts("grafana")["/etc/grafana/provisioning"]
    return {p: yaml.safe_load(p.read_text()) for p in sorted(root.rglob("*.y*ml"))}


def test_grafana_gets_every_variable_its_provisioning_reads() -> None:
    environment = service("grafana")["environment"]
    files = grafana_provisioning()
    assert files, "no provisioning files under deploy/grafana/provisioning"
    for path in files:
        # Grafana expands ${NAME} from its environment in provisioning values (queries and
        # annotations are taken raw, so their $__macros and {{ $labels }} stay as they are).
        for name in re.findall(r"\$\{([A-Z_][A-Z0-9_]*)\}", path.read_text()):
            assert name in environment, f"{path.name} reads ${name}, which grafana is not given"
    assert environment["CLICKHOUSE_HOST"] == "clickhouse"
    assert environment["PROMETHEUS_URL"] == "http://prometheus:9090"


def test_grafana_has_the_plugin_and_the_dashboards_its_provisioning_names() -> None:
    files = grafana_provisioning()
    datasources = [d for f in files.values() for d in (f or {}).get("datasources", [])]
    plugins = set(service("grafana")["environment"]["GF_INSTALL_PLUGINS"].split(","))
    builtin = {"prometheus"}
    for datasource in datasources:
        assert datasource["type"] in plugins | builtin, datasource["type"]
        if datasource["type"] == "grafana-clickhouse-datasource":
            database = replica_yaml()["storage"]["database"]
            assert datasource["jsonData"]["defaultDatabase"] == database
    providers = [p for f in files.values() for p in (f or {}).get("providers", [])]
    assert providers
    mounts = bind_mounts("grafana")
    for provider in providers:
        folder = mounts[provider["options"]["path"]]
        dashboards = sorted(folder.glob("*.json"))
        assert dashboards, f"no dashboards in {folder}"
        for dashboard in dashboards:
            assert json.loads(dashboard.read_text())["uid"]


def test_every_variable_the_stack_reads_is_documented_and_has_a_default() -> None:
    readme = (COMPOSE_DIR / "README.md").read_text()
    names = set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*)", COMPOSE_FILE.read_text()))
    names |= {s["environment"] for s in compose()["secrets"].values()}
    assert names, "the stack reads its credentials from variables"
    defaults = dict(
        line.split("=", 1)
        for line in (COMPOSE_DIR / ".env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    for name in names:
        assert f"`{name}`" in readme, f"{name} is not documented in deploy/compose/README.md"
        assert defaults.get(name), f"{name} has no default in deploy/compose/.env"
    for port in ("4317", "4318", "3000", "8123", "9000", "9090", "13133"):
        assert port in readme


@pytest.mark.parametrize("name", ["clickhouse", "prometheus"])
def test_internal_services_publish_on_loopback_only(name: str) -> None:
    for port in service(name).get("ports", []):
        assert str(port).startswith("127.0.0.1:"), port
