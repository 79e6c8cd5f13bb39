"""The tools a model was offered on an LLM call: each tool's name and the names of its
parameters, read from any of the shapes the dialects send them in.

- GenAI (`gen_ai.tool.definitions`, opt-in): a list (or its JSON) of
  `{"type": "function", "name": ..., "parameters": {JSON schema}}`;
- the OpenAI request shape, as chat transcripts and several instrumentations keep it:
  `{"type": "function", "function": {"name": ..., "parameters": {...}}}`; Anthropic's
  `{"name": ..., "input_schema": {...}}`;
- OpenInference (`llm.tools.<i>.tool.json_schema`): one JSON document per tool, in either
  shape above;
- OpenLLMetry (`llm.request.functions.<i>.name` / `.parameters`).

Detectors use them to know an agent's toolset before it calls a tool (which tools answer the
same query). Only names are kept, bounded (`MAX_TOOLS`, `MAX_PARAMETERS`, `values.NAME_MAX`,
`MAX_DOCUMENT`); a document that does not parse, or a tool without a name, is skipped. The same
definitions come with every LLM call of a run, so equal documents share one parsed tuple.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from mast_otel.processors.model import ToolSpec
from mast_otel.processors.normalize import values

# At most this many tools per LLM call, and parameters per tool, are kept.
MAX_TOOLS = 256
MAX_PARAMETERS = 64
# A definitions document longer than this (characters of JSON) is not parsed.
MAX_DOCUMENT = 512 * 1024


def from_document(value: object) -> tuple[ToolSpec, ...]:
    """The tools of one definitions attribute: a list of definitions or its JSON."""
    if isinstance(value, str):
        if len(value) > MAX_DOCUMENT:
            return ()
        # Cached by a digest, not by the text: the cache holds parsed names, never documents.
        digest = hashlib.blake2b(value.encode("utf-8", "replace"), digest_size=16).digest()
        cached = _CACHE.get(digest)
        if cached is None:
            cached = _parsed(value)
            with _CACHE_LOCK:
                _CACHE[digest] = cached
                while len(_CACHE) > _CACHE_SIZE:
                    del _CACHE[next(iter(_CACHE))]
        return cached
    if isinstance(value, list | tuple):
        return _specs(value)
    return ()


def from_indexed(
    entries: Iterable[Mapping[str, Any]], schema_key: str | None = None
) -> tuple[ToolSpec, ...]:
    """The tools of indexed entries, each holding one tool's JSON document under `schema_key`
    (OpenInference), or its `name` and `parameters` directly (OpenLLMetry, no `schema_key`)."""
    specs: list[ToolSpec] = []
    for entry in entries:
        if len(specs) >= MAX_TOOLS:
            break
        document = entry.get(schema_key) if schema_key else None
        if document is not None:
            parsed = values.parse_json(document) if _small(document) else None
            spec = _spec(parsed) if isinstance(parsed, dict) else None
        else:
            spec = _spec(entry)
        if spec is not None:
            specs.append(spec)
    return tuple(specs)


def _small(value: object) -> bool:
    """Whether `value` is no document text (a list or map as sent) or one short enough to
    parse."""
    return not isinstance(value, str | bytes | bytearray) or len(value) <= MAX_DOCUMENT


# Parsed documents by digest, oldest first; at most `_CACHE_SIZE` (the same few documents come
# with every LLM call of an agent).
_CACHE: dict[bytes, tuple[ToolSpec, ...]] = {}
_CACHE_SIZE = 64
_CACHE_LOCK = threading.Lock()


def _parsed(text: str) -> tuple[ToolSpec, ...]:
    parsed = values.parse_json(text)
    if isinstance(parsed, dict):
        parsed = [parsed]
    return _specs(parsed) if isinstance(parsed, list) else ()


def _specs(items: Iterable[object]) -> tuple[ToolSpec, ...]:
    specs: list[ToolSpec] = []
    for item in items:
        if len(specs) >= MAX_TOOLS:
            break
        spec = _spec(item) if isinstance(item, dict) else None
        if spec is not None:
            specs.append(spec)
    return tuple(specs)


def _spec(item: Mapping[str, Any]) -> ToolSpec | None:
    """One definition, in the GenAI, OpenAI-request or Anthropic shape."""
    function = item.get("function")
    if isinstance(function, dict):
        item = function
    name = values.name(item.get("name"))
    if not name:
        return None
    schema = item.get("parameters", item.get("input_schema"))
    if isinstance(schema, str) and _small(schema):
        schema = values.parse_json(schema)
    properties = schema.get("properties") if isinstance(schema, dict) else None
    parameters: list[str] = []
    if isinstance(properties, dict):
        for key in properties:
            if len(parameters) >= MAX_PARAMETERS:
                break
            key_name = values.name(key)
            if key_name:
                parameters.append(sys.intern(key_name))
    return ToolSpec(sys.intern(name), tuple(parameters))
