"""The structure drawn from the imports: no circle, nothing below importing upward.

Files over the size limit are printed, not failed on, until every room is cut."""

from __future__ import annotations

import json
import site
import subprocess
import sys
from pathlib import Path

from scripts import import_graph as ig


def test_the_product_has_no_circle_and_no_upward_import() -> None:
    graph = ig.build()
    assert len(graph.modules) > 50  # the packages were found
    assert ig.circles(graph) == []
    wrong = [f"{e.source} -> {e.target} (line {e.line}): {why}" for e, why in ig.upward(graph)]
    assert wrong == []
    for name, lines in ig.long_files(graph):
        print(f"over {ig.MAX_LINES} lines: {name} ({lines})")


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_a_circle_through_a_lazy_import_is_found(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "collector/__init__.py": "",
            "collector/store/__init__.py": "",
            "collector/store/a.py": "from collector.store import b\n",
            "collector/store/b.py": "def f():\n    from collector.store.a import g\n",
            "collector/store/c.py": "from collector.store.a import x\n",
        },
    )
    graph = ig.build(tmp_path, ("collector",))
    assert ig.circles(graph) == [["collector.store.a", "collector.store.b"]]


def test_a_type_only_import_closes_a_circle_and_counts_as_upward(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "collector/__init__.py": "",
            "collector/pipeline.py": "from collector.store import Store\n",
            "collector/store.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from collector.pipeline import Pipeline\n"
            ),
        },
    )
    graph = ig.build(tmp_path, ("collector",))
    assert ig.circles(graph) == [["collector.pipeline", "collector.store"]]
    (edge, why), *rest = ig.upward(graph)
    assert rest == []
    assert (edge.source, edge.target, edge.type_only) == (
        "collector.store",
        "collector.pipeline",
        True,
    )
    assert "imports layer" in why


def test_dashboards_may_not_import_the_collector(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "collector/__init__.py": "",
            "collector/metrics.py": "",
            "schemas/__init__.py": "",
            "schemas/metrics.py": "",
            "dashboards/__init__.py": "",
            "dashboards/health.py": (
                "from schemas import metrics\nfrom collector import metrics as m\n"
            ),
        },
    )
    graph = ig.build(tmp_path, ("collector", "schemas", "dashboards"))
    wrong = [(e.source, e.target) for e, _ in ig.upward(graph)]
    assert wrong == [("dashboards.health", "collector.metrics")]


def test_long_files_are_listed(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _tree(tmp_path, {"schemas/__init__.py": "x = 1\n" * 401, "schemas/small.py": "y = 2\n"})
    monkeypatch.setattr(ig, "ROOT", tmp_path)
    graph = ig.build(tmp_path, ("schemas",))
    assert ig.long_files(graph) == [(str(Path("schemas/__init__.py")), 401)]


# Run in a child started without `site` (so without the editable install's finder, which a .pth
# file installs), the site-packages folders added as plain paths for grimp itself and the
# checkout's .dev links first: what an editor or an import-graph tool sees in a plain checkout.
_GRIMP = """
import json, sys
sys.path[:0] = [sys.argv[1]]
sys.path += sys.argv[2].split(":")
import grimp
names = [f"mast_otel.{p}" for p in sys.argv[3:]]
graph = grimp.build_graph(*names, cache_dir=None)
edges = sorted(
    [m, t] for m in graph.modules for t in graph.find_modules_directly_imported_by(m)
)
print(json.dumps({"modules": sorted(graph.modules), "edges": edges}))
"""


def test_an_import_graph_tool_reads_the_checkout_as_the_installed_package() -> None:
    """grimp, an import-graph tool, follows every import of a plain checkout through the
    .dev links scripts/setup.sh lays, and finds the graph this script draws: same modules, same
    imports (type-only ones included)."""
    root = Path(ig.__file__).resolve().parent.parent
    subprocess.run(["bash", str(root / "scripts" / "dev-links.sh")], check=True)
    done = subprocess.run(
        [
            sys.executable,
            "-S",
            "-c",
            _GRIMP,
            str(root / ".dev"),
            ":".join(site.getsitepackages()),
            *ig.PACKAGES,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root.parent,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    ours = ig.build()
    assert {m.removeprefix(ig.NAMESPACE) for m in found["modules"]} == set(ours.modules)
    theirs = {
        (a.removeprefix(ig.NAMESPACE), b.removeprefix(ig.NAMESPACE)) for a, b in found["edges"]
    }
    assert theirs == {(e.source, e.target) for e in ours.edges}
