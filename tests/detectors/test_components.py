"""Detectors are components: each module ends with one factory (type, mode, config class with
its defaults and own validation, create function), the package lists the factories, and a
detector added as one more factory is configured from the config file like the others."""

from __future__ import annotations

import ast
import dataclasses
import importlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from mast_otel.collector.config import Config, ConfigError, apply_overrides, load_config
from mast_otel.processors.conventions import MODE_CODES
from mast_otel.processors.detectors import FACTORIES, Detector, DetectorContext, DetectorFactory
from mast_otel.processors.detectors.config import DetectorsConfig
from mast_otel.processors.model import Finding, Step, StepKind
from mast_otel.processors.run import DetectorRun, Run
from tests.steps import RunBuilder, analyse


def test_every_mode_has_one_factory_in_taxonomy_order() -> None:
    assert [f.mode for f in FACTORIES] == list(MODE_CODES)
    assert len({f.type for f in FACTORIES}) == len(FACTORIES)


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: f.type)
def test_a_factory_lives_at_the_end_of_the_module_named_for_it(factory: DetectorFactory) -> None:
    name = f"mast_otel.processors.detectors.{factory.type}"
    module = importlib.import_module(name)
    # A rule family's folder: its __init__.py is its docstring alone, detector.py ends with the
    # factory and config.py holds the configuration.
    assert hasattr(module, "__path__"), f"{name} is not a folder"
    init = ast.parse(Path(module.__file__ or "").read_text(encoding="utf-8"))
    assert [type(node) for node in init.body] == [ast.Expr]
    assert ast.get_docstring(init)
    module = importlib.import_module(f"{name}.detector")
    configs = (f"{name}.config",)
    assert module.FACTORY is factory
    assert factory.config.__module__ in configs
    config = factory.default_config()
    config.validate()
    assert config.enabled is True


def test_the_detectors_section_is_assembled_from_the_factories() -> None:
    names = [f.name for f in dataclasses.fields(DetectorsConfig())]  # type: ignore[arg-type]
    assert names == ["signals", *(f.type for f in FACTORIES)]


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "step_repetition.min_repeats",
            1,
            "detectors.step_repetition.min_repeats must be at least 2",
        ),
        (
            "history_loss.shrink_ratio",
            1.5,
            "detectors.history_loss.shrink_ratio must be between 0 and 1",
        ),
        (
            "missing_verification.max_tracked_mutations",
            0,
            "detectors.missing_verification.max_findings_per_run and max_tracked_mutations "
            "must be at least 1",
        ),
        (
            "premature_termination.required_final_pattern",
            "(",
            "detectors.premature_termination.required_final_pattern: invalid regular "
            "expression (missing ), unterminated subpattern at position 0)",
        ),
        (
            "role_specification.read_only_agents",
            ["["],
            "detectors.role_specification.read_only_agents: '[' is not a valid regular "
            "expression (unterminated character set at position 0)",
        ),
        (
            "history_loss.summary_pattern",
            "(",
            "detectors.history_loss.summary_pattern: invalid regular expression "
            "(missing ), unterminated subpattern at position 0)",
        ),
    ],
)
def test_bad_values_are_named_by_their_key(tmp_path, key: str, value: Any, message: str) -> None:
    section, option = key.split(".")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"detectors": {section: {option: value}}}))
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert str(raised.value) == message


# A detector that is not part of the product, written as a detector module would be.


@dataclass
class RepeatedToolConfig:
    """A toy: a run that calls one tool at least this many times."""

    # Run this detector.
    enabled: bool = True
    # Calls of one tool that make a finding.
    min_calls: int = 3

    def validate(self) -> None:
        if self.min_calls < 1:
            raise ValueError("detectors.repeated_tool.min_calls must be at least 1")


class RepeatedTool(Detector):
    mode = "FM-X.1"
    name = "repeated_tool"
    version = "0.1"
    config: RepeatedToolConfig

    def __init__(self, config: RepeatedToolConfig, context: DetectorContext) -> None:
        super().__init__(config, context)

    def open(self, run: Run) -> DetectorRun:
        return _RepeatedToolRun(self)


class _RepeatedToolRun(DetectorRun):
    kinds = frozenset({StepKind.TOOL})

    def __init__(self, detector: RepeatedTool) -> None:
        self.detector = detector
        self.calls: dict[str, list[Step]] = {}

    def on_step(self, step: Step, run: Run) -> Iterable[Finding]:
        assert step.kind is StepKind.TOOL
        self.calls.setdefault(step.tool_name, []).append(step)
        return ()

    def on_close(self, run: Run) -> Iterable[Finding]:
        for tool, steps in self.calls.items():
            if len(steps) >= self.detector.config.min_calls:
                yield self.detector.report.finding(
                    steps[-1], "repeated", 0.5, f"{tool} {len(steps)} times", steps, {}, run
                )


REPEATED_TOOL = DetectorFactory(
    type="repeated_tool", mode="FM-X.1", config=RepeatedToolConfig, create=RepeatedTool
)
WITH_TOY = (*FACTORIES, REPEATED_TOOL)


def configured(text: str) -> Config:
    """The collector's config with the toy's section, `text` (YAML) applied by the loader."""
    base = dataclasses.replace(Config(), detectors=DetectorsConfig.with_detectors(REPEATED_TOOL)())
    return apply_overrides(base, yaml.safe_load(text))


def two_pod_listings() -> list[Step]:
    run = RunBuilder()
    run.tool("get_pods", {"namespace": "shop"}, result="checkout-1 Running")
    run.tool("get_pods", {"namespace": "billing"}, result="payments-1 Running")
    return [*run.steps, run.root()]


def test_a_new_detector_is_configured_from_yaml_and_finds() -> None:
    config = configured("detectors:\n  repeated_tool:\n    min_calls: 2\n")
    assert config.detectors.repeated_tool.min_calls == 2
    assert config.detectors.step_repetition.min_repeats == 3  # the others keep their defaults
    findings, signatures = analyse(two_pod_listings(), config.detectors, WITH_TOY)
    toy = [f for f in findings if f.detector == "repeated_tool"]
    assert [(f.mode, f.rule, f.message) for f in toy] == [
        ("FM-X.1", "repeated", "get_pods 2 times")
    ]
    assert toy[0].evidence_span_ids == tuple(s.span_id for s in two_pod_listings()[:2])
    assert signatures[0].mode_counts.get("FM-X.1") == 1


def test_a_new_detector_keeps_its_defaults_and_can_be_disabled() -> None:
    by_default = configured("detectors: {}\n")
    findings, _ = analyse(two_pod_listings(), by_default.detectors, WITH_TOY)
    assert not [f for f in findings if f.detector == "repeated_tool"]  # 2 calls < 3
    off = configured("detectors:\n  repeated_tool:\n    enabled: false\n    min_calls: 1\n")
    findings, _ = analyse(two_pod_listings(), off.detectors, WITH_TOY)
    assert not [f for f in findings if f.detector == "repeated_tool"]


def test_a_new_detectors_bad_values_are_named_by_their_key() -> None:
    with pytest.raises(ConfigError, match=r"^detectors\.repeated_tool\.min_calls must be at"):
        configured("detectors:\n  repeated_tool:\n    min_calls: 0\n")
    with pytest.raises(ConfigError, match=r"^detectors\.repeated_tool\.min_calls: expected a"):
        configured("detectors:\n  repeated_tool:\n    min_calls: many\n")
    with pytest.raises(ConfigError, match=r"^detectors\.repeated_tool\.threshold: unknown"):
        configured("detectors:\n  repeated_tool:\n    threshold: 2\n")


def test_a_factory_must_create_the_detector_it_names() -> None:
    wrong = DetectorFactory(
        type="repeated_tool", mode="FM-X.2", config=RepeatedToolConfig, create=RepeatedTool
    )
    config = DetectorsConfig.with_detectors(wrong)()
    with pytest.raises(ValueError, match=r"names itself 'repeated_tool' \(FM-X\.1\)"):
        analyse(two_pod_listings(), config, (*FACTORIES, wrong))
