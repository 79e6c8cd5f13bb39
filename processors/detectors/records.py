"""The record a call asked for by id: shared by the detectors that follow records across a run
(FM-2.6's amounts added to a record, FM-3.3's changes on records whose items are past)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from mast_otel.processors.classify import ActionClassifier
from mast_otel.processors.detectors.base import json_doc
from mast_otel.processors.model import Step


def record_asked_for(
    classifier: ActionClassifier, step: Step
) -> tuple[dict[str, Any], frozenset[str]] | None:
    """The JSON object a call's result holds, with the ids of the call's arguments that the
    object itself holds as a value (the record was asked for by those ids); None when the
    result is no object or holds none of them. The record is shared with the other readers
    of the step: it is only read."""
    return _asked(classifier, step.tool_arguments, step.tool_result)


# Four detectors ask for the same step's record: the last few are kept.
@lru_cache(maxsize=16)
def _asked(
    classifier: ActionClassifier, arguments: str, result: str
) -> tuple[dict[str, Any], frozenset[str]] | None:
    if not result.lstrip().startswith("{"):
        return None
    ids = classifier.identifiers(arguments)
    if not ids:
        return None
    record = json_doc(result)
    if not isinstance(record, dict):
        return None
    held = {
        str(v).strip().lower()
        for v in record.values()
        if isinstance(v, str | int) and not isinstance(v, bool)
    }
    found = ids & held
    return (record, frozenset(found)) if found else None
