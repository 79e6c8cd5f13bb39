"""The module import graph of the product's code, drawn from the source, and what is wrong in it.

Reads every module under collector/, processors/, schemas/ and dashboards/ with `ast` (nothing
is imported or run), takes each `import` and `from ... import` of one of those packages as an
edge, and reports:

- circles: modules that import each other, directly or through others, type-only imports
  (those under `if TYPE_CHECKING:`) included: a module that names another's class in its
  annotations depends on it as much as one that calls it, and a rule that must know its host
  to be read is the tangle this check is for;
- upward imports: a module importing one in a higher layer (see LAYERS), type-only imports
  included, since they are a dependency of the design all the same; and for `dashboards`,
  anything beyond what it may import (see DASHBOARDS_MAY_IMPORT);
- files over MAX_LINES lines.

    python scripts/import_graph.py            # the report; exit status 1 on a circle or an
                                              # upward import
    python scripts/import_graph.py --edges    # the edges too, one `a -> b` a line
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("collector", "processors", "schemas", "dashboards")
# The folders install as `mast_otel.<folder>`; the graph names modules by their folder.
NAMESPACE = "mast_otel."
MAX_LINES = 400

# Lower layers first. A module may import modules of its own layer or of lower ones; the most
# specific prefix names a module's layer. Within a layer, only circles are forbidden.
LAYERS: tuple[tuple[str, ...], ...] = (
    # conventions, importing nothing of the product: the storage schema and metric names, and
    # the conventions spans follow and findings use (modes, attributes)
    ("schemas", "processors.conventions"),
    # what turns spans into findings, with no I/O
    ("processors",),
    # the collector's settings and the contracts between its parts
    ("collector.__init__", "collector.config", "collector.config_reference", "collector.consumer"),
    # the store, decoding, the spool, the judge's client, TLS and auth
    (
        "collector.store",
        "collector.otlp",
        "collector.spool",
        "collector.spool_format",
        "collector.spool_replay",
        "collector.judge",
        "collector.security",
        # the worker processes' parts that need no pipeline: the shard function, routing by
        # run, the wire, the part header, the pool, a worker's main loop, the store's owner
        "collector.workers.shard",
        "collector.workers.route",
        "collector.workers.wire",
        "collector.workers.parts",
        "collector.workers.pool",
        "collector.workers.pool_config",
        "collector.workers.worker_main",
        "collector.workers.store_owner",
    ),
    # the pipeline's parts: what the queue carries and what is counted, the spool's ledger,
    # admission, the stages, the tick and the store's writes, the replay
    (
        "collector.pipeline.batch",
        "collector.pipeline.stats",
        "collector.pipeline.ledger",
        "collector.pipeline.admission",
        "collector.pipeline.stages",
        "collector.pipeline.writes",
        "collector.pipeline.replay",
    ),
    # the pipeline, which makes its parts and wires them (they never import it)
    ("collector.pipeline",),
    # what drives the pipeline from stored spans, the file readers, and the self-metrics
    # (`collector.workers`: the receiving process's side and a worker's pipeline)
    ("collector.reanalysis", "collector.importers", "collector.run_steps", "collector.workers"),
    # the network receivers, and the self-metrics that read their counters
    ("collector.receivers", "collector.metrics"),
    # what runs the pipeline: the service (receivers to store), the import of files, the demo
    ("collector.service", "collector.analyze", "collector.demo"),
    # the command line
    ("collector.cli",),
)

# Dashboards are generated from the stored schema and the metric names, never from the code
# that writes them: they may import these (and themselves) only.
DASHBOARDS_MAY_IMPORT = ("dashboards", "schemas", "processors.conventions", "processors.scoring")


@dataclass(frozen=True, slots=True)
class Edge:
    source: str
    target: str
    line: int
    type_only: bool


@dataclass
class Graph:
    modules: dict[str, Path] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)

    def targets(self) -> dict[str, set[str]]:
        """Each module's imports, type-only ones included."""
        out: dict[str, set[str]] = {m: set() for m in self.modules}
        for edge in self.edges:
            out[edge.source].add(edge.target)
        return out


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
        # A package's own module: named by the package, so imports of it resolve.
    return ".".join(parts)


def _type_checking_lines(tree: ast.Module) -> set[int]:
    """Line numbers of the statements under `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
        if name != "TYPE_CHECKING":
            continue
        for child in node.body:
            for inner in ast.walk(child):
                if hasattr(inner, "lineno"):
                    lines.add(inner.lineno)
    return lines


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The known module `name` is, or is inside of (`a.b.c` where only `a.b` is a module)."""
    while name:
        if name in modules:
            return name
        if "." not in name:
            return None
        name = name.rsplit(".", 1)[0]
    return None


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def _imported(
    node: ast.Import | ast.ImportFrom, module: str, path: Path, modules: dict[str, Path]
) -> Iterable[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            target = _resolve(alias.name.removeprefix(NAMESPACE), modules)
            if target:
                yield target
        return
    base = (node.module or "").removeprefix(NAMESPACE)
    if node.level:
        package = _package_of(module, path).split(".")
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    for alias in node.names:
        # `from a import b` is an import of module `a.b` when there is one, else of `a`.
        target = _resolve(f"{base}.{alias.name}", modules) if alias.name != "*" else None
        if target is None or target == _resolve(base, modules):
            target = _resolve(base, modules)
        if target:
            yield target


def build(root: Path = ROOT, packages: Iterable[str] = PACKAGES) -> Graph:
    graph = Graph()
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            graph.modules[module_name(path, root)] = path
    for module, path in graph.modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        type_only = _type_checking_lines(tree)
        edges: dict[tuple[str, int], Edge] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in _imported(node, module, path, graph.modules):
                    if target != module:
                        edge = Edge(module, target, node.lineno, node.lineno in type_only)
                        edges.setdefault((target, node.lineno), edge)
        graph.edges.extend(edges.values())
    return graph


def circles(graph: Graph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), over every import."""
    targets = graph.targets()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(targets):
        if start in index:
            continue
        # Iterative depth-first search: (node, its remaining successors).
        work = [(start, iter(sorted(targets[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(targets[succ]))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return sorted(found)


def _cycle_through(graph: Graph, group: list[str]) -> list[str]:
    """A shortest import path from the group's first module back to itself, inside the group."""
    inside = set(group)
    targets = graph.targets()
    start = group[0]
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for target in sorted(targets[module] & inside):
                if target == start:
                    path = [module]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if target not in came_from:
                    came_from[target] = module
                    following.append(target)
        frontier = following
    return group


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None  # (prefix length, layer)
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            inside = module == prefix or module.startswith(prefix + ".")
            if inside and (best is None or len(prefix) > best[0]):
                best = (len(prefix), rank)
    if module == "collector":
        return LAYERS.index(next(layer for layer in LAYERS if "collector.__init__" in layer))
    return None if best is None else best[1]


def _within(module: str, prefixes: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def upward(graph: Graph) -> list[tuple[Edge, str]]:
    """Imports against the layering, each with why."""
    wrong: list[tuple[Edge, str]] = []
    for edge in graph.edges:
        if _within(edge.source, ("dashboards",)):
            if not _within(edge.target, DASHBOARDS_MAY_IMPORT):
                wrong.append(
                    (edge, "dashboards may import only " + ", ".join(DASHBOARDS_MAY_IMPORT))
                )
            continue
        if _within(edge.target, ("dashboards",)):
            # Only the command line (which generates and pushes them) uses the dashboards.
            if not _within(edge.source, ("collector.cli",)):
                wrong.append((edge, "only collector.cli may import dashboards"))
            continue
        source, target = layer_of(edge.source), layer_of(edge.target)
        if source is None:
            wrong.append((edge, f"{edge.source} is in no layer"))
        elif target is None:
            wrong.append((edge, f"{edge.target} is in no layer"))
        elif target > source:
            wrong.append((edge, f"layer {source} imports layer {target}"))
    return wrong


def long_files(graph: Graph, limit: int = MAX_LINES) -> list[tuple[str, int]]:
    sizes = [
        (str(path.relative_to(ROOT)), len(path.read_text(encoding="utf-8").splitlines()))
        for path in graph.modules.values()
    ]
    return sorted(((name, n) for name, n in sizes if n > limit), key=lambda x: -x[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edges", action="store_true", help="print every edge")
    args = parser.parse_args(argv)
    graph = build()
    if args.edges:
        for edge in sorted(graph.edges, key=lambda e: (e.source, e.target)):
            note = "  (type only)" if edge.type_only else ""
            print(f"{edge.source} -> {edge.target}{note}")
    found = circles(graph)
    wrong = upward(graph)
    print(f"{len(graph.modules)} modules, {len(graph.edges)} imports")
    print(f"circles: {len(found)}")
    for group in found:
        # The modules that reach each other; one path through them, for the reader to cut.
        print(f"  {len(group)} modules: " + ", ".join(group))
        print("    e.g. " + " -> ".join(_cycle_through(graph, group)))
    print(f"upward imports: {len(wrong)}")
    for edge, why in wrong:
        path = graph.modules[edge.source].relative_to(ROOT)
        print(f"  {path}:{edge.line}: {edge.source} -> {edge.target} ({why})")
    long = long_files(graph)
    print(f"files over {MAX_LINES} lines: {len(long)}")
    for name, n in long:
        print(f"  {name}: {n}")
    return 1 if found or wrong else 0


if __name__ == "__main__":
    sys.exit(main())
