"""Grafana provisioning: the data sources, the dashboards folder and an example contact point,
as files for `provisioning/` and as the HTTP API's payloads (`push`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mast_otel.dashboards.alert_rules import FOLDER_TITLE, FOLDER_UID
from mast_otel.dashboards.clickhouse import CLICKHOUSE_UID, PLUGIN_ID, PROMETHEUS_UID
from mast_otel.dashboards.variables import DEFAULT_DATABASE

# Where the provisioning file tells Grafana to read the dashboards' JSON.
DASHBOARDS_PATH = "/var/lib/grafana/dashboards/mast-otel"


@dataclass(frozen=True)
class ClickHouseSettings:
    """How Grafana reaches the store (a ClickHouse server: Grafana cannot open chDB files)."""

    host: str = "clickhouse"
    port: int = 9000
    protocol: str = "native"
    secure: bool = False
    username: str = "default"
    password: str = ""
    database: str = DEFAULT_DATABASE


def clickhouse_datasource(settings: ClickHouseSettings) -> dict[str, Any]:
    source: dict[str, Any] = {
        "name": "mast-otel ClickHouse",
        "type": PLUGIN_ID,
        "uid": CLICKHOUSE_UID,
        "access": "proxy",
        "jsonData": {
            "host": settings.host,
            "port": settings.port,
            "protocol": settings.protocol,
            "secure": settings.secure,
            "username": settings.username,
            "defaultDatabase": settings.database,
        },
    }
    if settings.password:
        source["secureJsonData"] = {"password": settings.password}
    return source


def prometheus_datasource(url: str) -> dict[str, Any]:
    return {
        "name": "mast-otel Prometheus",
        "type": "prometheus",
        "uid": PROMETHEUS_UID,
        "access": "proxy",
        "url": url,
        "jsonData": {"httpMethod": "POST"},
    }


def datasources_file() -> dict[str, Any]:
    """provisioning/datasources/: values from the environment of Grafana's process."""
    clickhouse = clickhouse_datasource(
        ClickHouseSettings(
            host="${CLICKHOUSE_HOST}",
            username="${CLICKHOUSE_USER}",
            password="${CLICKHOUSE_PASSWORD}",
        )
    )
    return {
        "apiVersion": 1,
        "datasources": [
            {**clickhouse, "editable": False},
            {**prometheus_datasource("${PROMETHEUS_URL}"), "editable": False},
        ],
    }


def dashboards_file() -> dict[str, Any]:
    """provisioning/dashboards/: a file provider reading the generated JSON."""
    return {
        "apiVersion": 1,
        "providers": [
            {
                "name": "mast-otel",
                "folder": FOLDER_TITLE,
                "folderUid": FOLDER_UID,
                "type": "file",
                "disableDeletion": False,
                "allowUiUpdates": False,
                "updateIntervalSeconds": 60,
                "options": {"path": DASHBOARDS_PATH, "foldersFromFilesStructure": False},
            }
        ],
    }


def contact_points_file() -> dict[str, Any]:
    """provisioning/alerting/: an example webhook contact point; replace the URL (or the
    receiver type) with the on-call system's, and route the `mast-otel` folder's alerts to it
    in the notification policy."""
    return {
        "apiVersion": 1,
        "contactPoints": [
            {
                "orgId": 1,
                "name": "mast-otel on-call",
                "receivers": [
                    {
                        "uid": "mast-otel-oncall-webhook",
                        "type": "webhook",
                        "settings": {"url": "${MAST_OTEL_ONCALL_WEBHOOK_URL}"},
                        "disableResolveMessage": False,
                    }
                ],
            }
        ],
    }
