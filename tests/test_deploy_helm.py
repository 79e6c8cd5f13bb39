"""The Helm chart (deploy/helm/mast-otel), linted and rendered by Helm's own Go SDK (the engine
`helm lint` and `helm template` run), every rendered object validated against the Kubernetes
API's JSON schemas (strict: unknown fields fail) for the oldest and newest supported versions,
and its wiring checked: probes on the health endpoint, the headless service the balancer's DNS
resolver lists, the ConfigMap's configuration loaded by mast-otel itself. No cluster runs here,
so nothing is installed (README, Deploy)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml

from mast_otel.collector.cli import build_parser
from mast_otel.collector.config import load_config, parse_endpoint
from tests.deploy_checks import (
    check_otelcol_config,
    loadbalancing_exporters,
    needs_clickhouse_backend,
)

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "deploy" / "helm" / "mast-otel"
RELEASE, NAMESPACE = "mo", "observability"
KUBERNETES = ("1.25.0", kubernetes_validate.latest_version())
PASSWORD = {"clickhouse": {"password": "s3cret"}}
CHDB_SINGLE = {
    "replicaCount": 1,
    "config": {"storage": {"backend": "chdb"}, "sharding": {"merge_split_runs": False}},
    "persistence": {"enabled": True, "size": "20Gi"},
}


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    with helm.Chart.load(str(CHART)) as chart:
        rendered = chart.render(values, name=RELEASE, namespace=NAMESPACE)
    objects = []
    for path, text in sorted(rendered.items()):
        if path.endswith(".txt"):
            continue
        objects += [doc for doc in yaml.safe_load_all(text) if doc]
    return objects


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [
        o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def kinds(objects: list[dict[str, Any]]) -> list[str]:
    return sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objects)


def matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_helm_lint_finds_no_error_or_warning() -> None:
    report = helm.lint(str(CHART), PASSWORD, strict=True)
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize(
    "values",
    [PASSWORD, {**PASSWORD, "loadBalancer": {"enabled": True}}, CHDB_SINGLE],
    ids=["default", "load-balancer", "chdb-single"],
)
@pytest.mark.parametrize("version", KUBERNETES)
def test_every_object_is_valid_for_kubernetes(values: dict[str, Any], version: str) -> None:
    for obj in render(values):
        kubernetes_validate.validate(obj, version, strict=True)


def test_default_release_objects() -> None:
    objects = render(PASSWORD)
    assert kinds(objects) == [
        "ConfigMap/mo-mast-otel",
        "PodDisruptionBudget/mo-mast-otel",
        "Secret/mo-mast-otel",
        "Service/mo-mast-otel",
        "Service/mo-mast-otel-headless",
        "StatefulSet/mo-mast-otel",
    ]


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    pod = find(objects, "StatefulSet")["spec"]["template"]["spec"]
    (only,) = pod["containers"]
    result: dict[str, Any] = only
    return result


def config_of(objects: list[dict[str, Any]]) -> Any:
    text = find(objects, "ConfigMap", f"{RELEASE}-mast-otel")["data"]["config.yaml"]
    return text


def rendered_config(values: dict[str, Any], tmp_path: Path) -> Any:
    path = tmp_path / "config.yaml"
    path.write_text(config_of(render(values)))
    return load_config(path)


def test_configmap_of_a_single_embedded_replica_loads(tmp_path: Path) -> None:
    config = rendered_config(CHDB_SINGLE, tmp_path)
    assert parse_endpoint(config.receivers.grpc.endpoint, "grpc") == ("0.0.0.0", 4317)
    assert parse_endpoint(config.receivers.http.endpoint, "http") == ("0.0.0.0", 4318)
    assert config.storage.data_dir == "/var/lib/mast-otel/data"


@needs_clickhouse_backend
def test_configmap_of_the_replicas_loads(tmp_path: Path) -> None:
    config = rendered_config(PASSWORD, tmp_path)
    assert parse_endpoint(config.receivers.grpc.endpoint, "grpc") == ("0.0.0.0", 4317)
    assert parse_endpoint(config.receivers.http.endpoint, "http") == ("0.0.0.0", 4318)
    assert config.storage.backend == "clickhouse"
    assert config.sharding.merge_split_runs is True


def test_container_command_is_one_mast_otel_accepts() -> None:
    main = container(render(PASSWORD))
    args = build_parser().parse_args(main["args"])
    assert args.command == "serve" and args.config == "/etc/mast-otel/config.yaml"
    assert "env" not in main  # no credential in the environment


@needs_clickhouse_backend
def test_password_reaches_the_collector_as_the_file_its_config_names(tmp_path: Path) -> None:
    values = {"clickhouse": {"password": "s3cret", "cluster": "{cluster}"}}
    objects = render(values)
    storage = rendered_config(values, tmp_path).storage
    assert (storage.clickhouse.url, storage.clickhouse.username) == (
        "http://clickhouse:8123",
        "mast",
    )
    assert storage.cluster == "{cluster}"
    main = container(objects)
    pod = find(objects, "StatefulSet")["spec"]["template"]["spec"]
    directory, key = storage.clickhouse.password_file.rsplit("/", 1)
    mount = next(m for m in main["volumeMounts"] if m["mountPath"] == directory)
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    secret = find(objects, "Secret", volume["secret"]["secretName"])
    assert [i["path"] for i in volume["secret"]["items"]] == [key]
    assert base64.b64decode(secret["data"][key]) == b"s3cret"


def test_probes_ask_healthz_on_the_http_receiver_port() -> None:
    main = container(render(PASSWORD))
    ports = {p["name"]: p["containerPort"] for p in main["ports"]}
    assert ports == {"otlp-grpc": 4317, "otlp-http": 4318}
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert main[probe]["httpGet"] == {"path": "/healthz", "port": "otlp-http"}
    mounts = {m["mountPath"] for m in main["volumeMounts"]}
    assert {"/etc/mast-otel", "/var/lib/mast-otel", "/tmp"} <= mounts
    assert main["resources"]["requests"]["cpu"] and main["resources"]["requests"]["memory"]


def test_pods_run_as_the_images_non_root_user() -> None:
    objects = render(PASSWORD)
    pod = find(objects, "StatefulSet")["spec"]["template"]["spec"]
    dockerfile = (ROOT / "deploy" / "Dockerfile").read_text()
    assert f"USER {pod['securityContext']['runAsUser']}:" in dockerfile
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container(objects)["securityContext"]["readOnlyRootFilesystem"] is True


def test_services_and_budget_select_the_replicas() -> None:
    objects = render(PASSWORD)
    statefulset = find(objects, "StatefulSet")
    labels = statefulset["spec"]["template"]["metadata"]["labels"]
    assert matches(statefulset["spec"]["selector"]["matchLabels"], labels)
    headless = find(objects, "Service", f"{RELEASE}-mast-otel-headless")
    assert headless["spec"]["clusterIP"] == "None"
    assert statefulset["spec"]["serviceName"] == headless["metadata"]["name"]
    for service in (headless, find(objects, "Service", f"{RELEASE}-mast-otel")):
        assert matches(service["spec"]["selector"], labels)
        assert {p["targetPort"] for p in service["spec"]["ports"]} == {"otlp-grpc", "otlp-http"}
    budget = find(objects, "PodDisruptionBudget")
    assert matches(budget["spec"]["selector"]["matchLabels"], labels)
    assert budget["spec"]["maxUnavailable"] == 1


def test_load_balancer_tier_routes_by_trace_id_to_the_headless_service() -> None:
    objects = render({**PASSWORD, "loadBalancer": {"enabled": True}})
    lb_config = yaml.safe_load(
        find(objects, "ConfigMap", f"{RELEASE}-mast-otel-lb")["data"]["config.yaml"]
    )
    assert check_otelcol_config(lb_config) == []
    (exporter,) = loadbalancing_exporters(lb_config)
    dns = exporter["resolver"]["dns"]
    headless = find(objects, "Service", f"{RELEASE}-mast-otel-headless")
    assert dns["hostname"] == f"{headless['metadata']['name']}.{NAMESPACE}.svc.cluster.local"
    grpc = next(p for p in headless["spec"]["ports"] if p["name"] == "otlp-grpc")
    assert dns["port"] == str(grpc["port"])
    deployment = find(objects, "Deployment", f"{RELEASE}-mast-otel-lb")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    lb_service = find(objects, "Service", f"{RELEASE}-mast-otel-lb")
    assert matches(lb_service["spec"]["selector"], pod_labels)
    # The balancer's pods are not the replicas: the headless service must not list them.
    assert not matches(headless["spec"]["selector"], pod_labels)
    budgets = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    assert len(budgets) == 2


def test_embedded_store_gets_a_volume_per_replica_and_no_secret() -> None:
    objects = render(CHDB_SINGLE)
    assert not [o for o in objects if o["kind"] == "Secret"]
    statefulset = find(objects, "StatefulSet")
    (claim,) = statefulset["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "20Gi"
    assert not [m for m in container(objects)["volumeMounts"] if "secret" in m["mountPath"]]


def test_existing_secret_is_used_instead_of_making_one() -> None:
    objects = render({"clickhouse": {"existingSecret": "ch-credentials"}})
    assert not [o for o in objects if o["kind"] == "Secret"]
    pod = find(objects, "StatefulSet")["spec"]["template"]["spec"]
    names = [v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v]
    assert names == ["ch-credentials"]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({}, "clickhouse.password (or clickhouse.existingSecret) is required"),
        ({"config": {"storage": {"backend": "chdb"}}}, "keeps one embedded store per replica"),
        ({**PASSWORD, "replicaCount": 0}, "/replicaCount"),
        ({**PASSWORD, "config": {"receivers": {}}}, "/config"),
        ({"clickhouse": {"url": "http://user:pw@ch:8123", "password": "x"}}, "/clickhouse/url"),
    ],
)
def test_mistakes_in_values_stop_the_render_with_the_key(
    values: dict[str, Any], message: str
) -> None:
    with pytest.raises(helm.HelmError, match=message.replace("(", r"\(").replace(")", r"\)")):
        render(values)
