"""The `detectors:` section of the config file: the signals several detectors read, then one
section per detector, assembled from the factories (each detector's module owns its section's
class, defaults and validation)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, make_dataclass
from typing import Any

from mast_otel.processors.detectors import FACTORIES
from mast_otel.processors.detectors.base import DetectorFactory
from mast_otel.processors.detectors.signals import SignalsConfig


class DetectorsConfig:
    """Thresholds of each failure mode's detector, one section per detector."""

    # The detectors' own sections follow `signals`, one per factory, in the factories' order
    # (added below, so that a new detector needs no line here).
    signals: SignalsConfig = field(default_factory=SignalsConfig)

    def section(self, name: str) -> Any:
        """One detector's section, by its name under `detectors:`."""
        return getattr(self, name)

    def validate(self) -> None:
        """The signals, then each detector's section by its own rules."""
        self.signals.validate()
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if f.name != "signals":
                self.section(f.name).validate()

    @classmethod
    def with_detectors(cls, *factories: DetectorFactory[Any]) -> type[DetectorsConfig]:
        """This config with a section more for each of `factories` (detectors that are not
        in FACTORIES, built with `build_detectors(..., factories=...)`)."""
        sections: list[tuple[str, Any, Any]] = [
            (f.type, f.config, field(default_factory=f.config)) for f in factories
        ]
        extended: type[DetectorsConfig] = make_dataclass(cls.__name__, sections, bases=(cls,))
        return extended


for _factory in FACTORIES:
    DetectorsConfig.__annotations__[_factory.type] = _factory.config
    setattr(DetectorsConfig, _factory.type, field(default_factory=_factory.config))
dataclass(DetectorsConfig)
