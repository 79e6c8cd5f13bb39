"""`mast-otel dashboards push` against a small fake of Grafana's HTTP API on loopback.

The fake is not Grafana (no Grafana server runs on these machines): it records every request
and answers as Grafana's /api/folders, /api/datasources, /api/dashboards/db and
/api/v1/provisioning/alert-rules endpoints do, checking what Grafana would reject. It proves
the requests are well formed and that a second push updates by uid instead of duplicating.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from mast_otel.dashboards import alert_rules, generate

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "glsa_test_token"


class FakeGrafana(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[tuple[str, str, dict[str, Any] | None]] = []
        self.folders: dict[str, dict[str, Any]] = {}
        self.datasources: dict[str, dict[str, Any]] = {}
        self.dashboards: dict[str, dict[str, Any]] = {}
        self.rules: dict[str, dict[str, Any]] = {}
        self.auth: set[str] = set()


class Handler(BaseHTTPRequestHandler):
    server: FakeGrafana

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _reply(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> dict[str, Any] | None:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length)) if length else None

    def _handle(self, method: str) -> None:
        body = self._body()
        path = self.path.split("?", 1)[0]
        self.server.requests.append((method, path, body))
        auth = self.headers.get("Authorization", "")
        if auth not in (f"Bearer {TOKEN}", "Basic " + base64.b64encode(b"admin:pw").decode()):
            self._reply(401, {"message": "Unauthorized"})
            return
        self.server.auth.add(auth.split()[0])
        status, answer = route(self.server, method, path, body, self.headers)
        self._reply(status, answer)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")


def route(g: FakeGrafana, method: str, path: str, body: Any, headers: Any) -> tuple[int, Any]:
    parts = path.strip("/").split("/")
    if parts[:2] == ["api", "folders"]:
        if method == "GET":
            folder = g.folders.get(parts[2])
            return (200, folder) if folder else (404, {"message": "folder not found"})
        if method == "POST":
            assert body["title"] and body["uid"]
            if body["uid"] in g.folders:
                return 409, {"message": "a folder with the same uid already exists"}
            g.folders[body["uid"]] = {**body, "id": len(g.folders) + 1, "version": 1}
            return 200, g.folders[body["uid"]]
    if parts[:2] == ["api", "datasources"]:
        if method == "GET" and parts[2] == "uid":
            source = g.datasources.get(parts[3])
            return (200, source) if source else (404, {"message": "Data source not found"})
        if method == "POST":
            assert {"name", "type", "uid", "access"} <= set(body)
            if any(s["name"] == body["name"] for s in g.datasources.values()):
                return 409, {"message": "data source with the same name already exists"}
            g.datasources[body["uid"]] = body
            return 200, {"datasource": body, "id": len(g.datasources), "message": "added"}
        if method == "PUT" and parts[2] == "uid":
            if parts[3] not in g.datasources:
                return 404, {"message": "Data source not found"}
            g.datasources[parts[3]] = body
            return 200, {"datasource": body, "message": "Datasource updated"}
    if path == "/api/dashboards/db" and method == "POST":
        dashboard = body["dashboard"]
        assert dashboard["uid"] and dashboard["title"] and dashboard["panels"]
        assert body["folderUid"] in g.folders, "dashboard pushed before its folder"
        existing = g.dashboards.get(dashboard["uid"])
        if existing and not body.get("overwrite"):
            return 412, {"status": "version-mismatch"}
        version = existing["version"] + 1 if existing else 1
        g.dashboards[dashboard["uid"]] = {
            "dashboard": dashboard,
            "version": version,
            "folderUid": body["folderUid"],
        }
        return 200, {
            "uid": dashboard["uid"],
            "status": "success",
            "version": version,
            "url": f"/d/{dashboard['uid']}",
        }
    if parts[:4] == ["api", "v1", "provisioning", "alert-rules"]:
        if method == "GET":
            rule = g.rules.get(parts[4])
            return (200, rule) if rule else (404, {"message": "rule not found"})
        check_rule(g, body)
        assert headers.get("X-Disable-Provenance") == "true"
        if method == "POST":
            if body["uid"] in g.rules:
                return 409, {"message": "a rule with this uid already exists"}
            g.rules[body["uid"]] = body
            return 201, body
        if method == "PUT":
            if parts[4] not in g.rules:
                return 404, {"message": "rule not found"}
            g.rules[parts[4]] = body
            return 200, body
    return 404, {"message": f"no route {method} {path}"}


def check_rule(g: FakeGrafana, rule: dict[str, Any]) -> None:
    """What Grafana's rule validation rejects."""
    for key in (
        "uid",
        "title",
        "condition",
        "data",
        "folderUID",
        "ruleGroup",
        "for",
        "noDataState",
        "execErrState",
        "orgID",
    ):
        assert key in rule, key
    assert rule["folderUID"] in g.folders
    refs = {query["refId"] for query in rule["data"]}
    assert rule["condition"] in refs
    for query in rule["data"]:
        assert query["datasourceUid"] == "__expr__" or query["datasourceUid"] in g.datasources
        assert query["model"]["refId"] == query["refId"]
    assert rule["noDataState"] in ("Alerting", "NoData", "OK")
    assert rule["execErrState"] in ("Alerting", "Error", "OK")


@pytest.fixture()
def grafana():
    server = FakeGrafana()
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def push(grafana: FakeGrafana, *auth: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mast_otel.collector.cli",
            "dashboards",
            "push",
            "--grafana-url",
            f"http://127.0.0.1:{grafana.server_address[1]}",
            *auth,
            "--clickhouse-host",
            "ch.internal",
            "--clickhouse-password",
            "secret",
            "--prometheus-url",
            "http://prometheus:9090",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def test_push_installs_everything_then_updates_in_place(grafana):
    first = push(grafana, "--token", TOKEN)
    assert first.returncode == 0, first.stderr
    n_rules = len(alert_rules.grafana_rules())
    assert set(grafana.dashboards) == set(generate.dashboards())
    assert set(grafana.datasources) == {"mast-clickhouse", "mast-prometheus"}
    assert len(grafana.rules) == n_rules and set(grafana.folders) == {"mast-otel"}
    assert grafana.datasources["mast-clickhouse"]["jsonData"]["host"] == "ch.internal"
    assert grafana.datasources["mast-clickhouse"]["secureJsonData"] == {"password": "secret"}
    before = len(grafana.requests)

    second = push(grafana, "--user", "admin", "--password", "pw")
    assert second.returncode == 0, second.stderr
    assert grafana.auth == {"Bearer", "Basic"}
    # Same uids: nothing new, every object updated.
    assert set(grafana.dashboards) == set(generate.dashboards())
    assert len(grafana.rules) == n_rules and len(grafana.datasources) == 2
    assert all(d["version"] == 2 for d in grafana.dashboards.values())
    later = grafana.requests[before:]
    assert not [r for r in later if r[0] == "POST" and r[1] != "/api/dashboards/db"]
    puts = [r[1] for r in grafana.requests if r[0] == "PUT"]
    assert len([p for p in puts if p.startswith("/api/v1/provisioning/alert-rules/")]) == n_rules
    assert "/api/datasources/uid/mast-clickhouse" in puts
    assert "updated" in second.stdout


def test_pushed_dashboards_are_the_generated_ones(grafana):
    assert push(grafana, "--token", TOKEN).returncode == 0
    for uid, dashboard in generate.dashboards().items():
        assert grafana.dashboards[uid]["dashboard"] == dashboard
        assert grafana.dashboards[uid]["folderUid"] == "mast-otel"


def test_push_with_bad_credentials_says_so(grafana):
    result = push(grafana, "--token", "wrong")
    assert result.returncode == 2
    assert "Grafana refused the folder" in result.stderr
    assert not grafana.dashboards


def test_push_needs_credentials(grafana):
    result = push(grafana)
    assert result.returncode == 2 and "--token" in result.stderr
