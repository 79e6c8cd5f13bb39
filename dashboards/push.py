"""Install the dashboards, data sources and alert rules into a running Grafana through its HTTP
API (grafana-client), idempotently: everything is addressed by uid, so a second push updates
what the first created instead of adding copies."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from grafana_client import GrafanaApi
from grafana_client.client import GrafanaClientError, GrafanaException

from mast_otel.dashboards import alert_rules, generate, provisioning
from mast_otel.dashboards.variables import DEFAULT_DATABASE


class PushError(RuntimeError):
    """Grafana refused or could not be reached; the message says which object and why."""


@dataclass
class PushReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"created {len(self.created)} ({', '.join(self.created) or '-'}); "
            f"updated {len(self.updated)} ({', '.join(self.updated) or '-'})"
        )


def connect(
    url: str,
    token: str | None = None,
    user: str | None = None,
    password: str | None = None,
    timeout_s: float = 10.0,
) -> GrafanaApi:
    """A client for `url` with a service-account token, or a user and password."""
    credential: str | tuple[str, str] | None
    if token:
        credential = token
    elif user is not None and password is not None:
        credential = (user, password)
    else:
        raise PushError("give --token, or --user and --password, for the Grafana API")
    return GrafanaApi.from_url(url, credential=credential, timeout=timeout_s)


def _exists(fetch: Callable[[str], Any], uid: str) -> bool:
    try:
        fetch(uid)
    except GrafanaClientError as exc:
        if exc.status_code == 404:
            return False
        raise
    return True


def with_database(dashboard: dict[str, Any], database: str) -> dict[str, Any]:
    """The dashboard reading `database` instead of the default (its hidden constant)."""
    if database == DEFAULT_DATABASE:
        return dashboard
    patched = copy.deepcopy(dashboard)
    for variable in patched.get("templating", {}).get("list", []):
        if variable.get("name") == "database":
            variable["query"] = database
            variable["current"] = {"text": database, "value": database, "selected": True}
    return patched


def push(
    api: GrafanaApi,
    clickhouse: provisioning.ClickHouseSettings,
    prometheus_url: str | None = None,
) -> PushReport:
    """Folder, data sources, dashboards, then alert rules (which need the folder and the data
    sources). Raises `PushError` naming the object Grafana refused."""
    report = PushReport()
    step = "folder"
    try:
        if _exists(api.folder.get_folder, alert_rules.FOLDER_UID):
            report.updated.append(f"folder {alert_rules.FOLDER_UID}")
        else:
            api.folder.create_folder(alert_rules.FOLDER_TITLE, uid=alert_rules.FOLDER_UID)
            report.created.append(f"folder {alert_rules.FOLDER_UID}")

        sources = [provisioning.clickhouse_datasource(clickhouse)]
        if prometheus_url:
            sources.append(provisioning.prometheus_datasource(prometheus_url))
        for source in sources:
            step = f"data source {source['uid']}"
            source_uid = source["uid"]
            if _exists(api.datasource.get_datasource_by_uid, source_uid):
                api.datasource.update_datasource_by_uid(source["uid"], source)
                report.updated.append(f"data source {source['uid']}")
            else:
                api.datasource.create_datasource(source)
                report.created.append(f"data source {source['uid']}")

        for uid, dashboard in generate.dashboards().items():
            step = f"dashboard {uid}"
            result = api.dashboard.update_dashboard(
                {
                    "dashboard": with_database(dashboard, clickhouse.database),
                    "folderUid": alert_rules.FOLDER_UID,
                    "overwrite": True,
                    "message": "mast-otel dashboards push",
                }
            )
            version = result.get("version", 1) if isinstance(result, dict) else 1
            (report.created if version == 1 else report.updated).append(f"dashboard {uid}")

        for rule in alert_rules.grafana_rules(clickhouse.database):
            uid = rule["uid"]
            step = f"alert rule {uid}"
            if _exists(api.alertingprovisioning.get_alertrule, uid):
                api.alertingprovisioning.update_alertrule(uid, rule, disable_provenance=True)
                report.updated.append(f"alert rule {uid}")
            else:
                api.alertingprovisioning.create_alertrule(rule, disable_provenance=True)
                report.created.append(f"alert rule {uid}")
    except GrafanaException as exc:
        raise PushError(f"Grafana refused the {step}: {exc}") from exc
    except OSError as exc:
        raise PushError(f"cannot reach Grafana while pushing the {step}: {exc}") from exc
    return report
