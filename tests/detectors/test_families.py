"""Each detector kept as a folder (a rule family) has the same shape: a package docstring and
nothing else, its config, the context its rules read, its detector ending with the factory,
and rule modules that never import a detector (so no rule needs its host to be read)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

DETECTORS = Path(__file__).resolve().parent.parent.parent / "processors" / "detectors"
FAMILIES = sorted(p.parent for p in DETECTORS.glob("*/detector.py"))


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _imported(tree: ast.Module) -> set[str]:
    """The modules a module imports, type-only imports included (`from a import b` is `a.b`
    as well as `a`: b may be a module)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_families_are_found() -> None:
    assert len(FAMILIES) >= 8


@pytest.mark.parametrize("family", FAMILIES, ids=lambda p: p.name)
def test_a_family_has_its_docstring_config_context_and_detector(family: Path) -> None:
    body = _tree(family / "__init__.py").body
    assert len(body) == 1 and ast.get_docstring(_tree(family / "__init__.py")), (
        f"{family.name}/__init__.py holds its docstring and nothing else"
    )
    for name in ("config.py", "context.py", "detector.py"):
        assert (family / name).is_file(), f"{family.name}/{name}"
    last = _tree(family / "detector.py").body[-1]
    assert isinstance(last, ast.Assign) and [
        t.id for t in last.targets if isinstance(t, ast.Name)
    ] == ["FACTORY"], f"{family.name}/detector.py ends with FACTORY = DetectorFactory(...)"


@pytest.mark.parametrize("family", FAMILIES, ids=lambda p: p.name)
def test_no_rule_module_imports_a_detector(family: Path) -> None:
    for path in sorted(family.glob("*.py")):
        if path.name == "detector.py":
            continue
        detectors = {
            name
            for name in _imported(_tree(path))
            if name.startswith("mast_otel.processors.detectors.") and name.endswith(".detector")
        }
        assert detectors == set(), f"{family.name}/{path.name} imports {sorted(detectors)}"


def _documented(family: Path, rule: str) -> bool:
    """Whether a module of the family names `rule` in its docstring with an example that fires
    and a near miss."""
    for path in family.glob("*.py"):
        doc = ast.get_docstring(_tree(path)) or ""
        if f"`{rule}`" in doc and "Fires" in doc and "Near miss" in doc:
            return True
    return False


def test_every_rule_found_on_the_corpora_is_documented_with_its_examples() -> None:
    """Each rule a finding of the scenario corpus or of tau-bench's runs names is described in
    its family, beside an example that fires it and a near miss, and listed in the family's
    docstring."""
    from scripts import corpus_fingerprint, real_accuracy
    from tests.corpora import tau_file

    findings, _ = corpus_fingerprint.analyse(corpus_fingerprint.record_corpus())
    rules = {(f.detector, f.rule) for f in findings}
    for run in real_accuracy.analyse(tau_file(), None):
        rules.update((_detector_of(f["mode"]), f["rule"]) for f in run.findings)
    assert len(rules) >= 40
    undocumented = [
        f"{detector}: {rule}"
        for detector, rule in sorted(rules)
        if not _documented(DETECTORS / detector, rule)
        or f"`{rule}`" not in (ast.get_docstring(_tree(DETECTORS / detector / "__init__.py")) or "")
    ]
    assert undocumented == []


def _detector_of(mode: str) -> str:
    from mast_otel.processors.detectors import FACTORIES

    return next(f.type for f in FACTORIES if f.mode == mode)
