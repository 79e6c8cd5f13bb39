"""The tools a model was offered, read from each dialect's definitions attributes into
`Step.tools_offered`: GenAI `gen_ai.tool.definitions`, OpenInference `llm.tools.<i>`,
OpenLLMetry `llm.request.functions.<i>`; bounded, and never raising on hostile values."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mast_otel.processors.model import ToolSpec
from mast_otel.processors.normalize import normalize_span, tool_definitions
from tests.test_normalize import must, span

SEARCH = {
    "type": "object",
    "properties": {"origin": {"type": "string"}, "date": {"type": "string"}},
    "required": ["origin"],
}


def _genai(definitions: Any) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.tool.definitions": definitions,
    }


def test_genai_definitions_in_each_shape() -> None:
    definitions = [
        {"type": "function", "name": "search_flights", "parameters": SEARCH},
        # The OpenAI request shape, as instrumentations that copy the request send it.
        {"type": "function", "function": {"name": "get_order", "parameters": {"properties": {}}}},
        # Anthropic's shape.
        {"name": "list_stock", "input_schema": {"properties": {"sku": {}}}},
    ]
    step = must(normalize_span(span(_genai(json.dumps(definitions)))))
    assert step.tools_offered == (
        ToolSpec("search_flights", ("origin", "date")),
        ToolSpec("get_order", ()),
        ToolSpec("list_stock", ("sku",)),
    )


def test_openinference_indexed_tool_schemas() -> None:
    attrs = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o",
        "llm.tools.0.tool.json_schema": json.dumps(
            {"type": "function", "function": {"name": "search_flights", "parameters": SEARCH}}
        ),
        "llm.tools.1.tool.json_schema": "{not json",
        "llm.tools.2.tool.json_schema": json.dumps({"name": "cancel", "parameters": {}}),
    }
    step = must(normalize_span(span(attrs)))
    assert step.tools_offered == (
        ToolSpec("search_flights", ("origin", "date")),
        ToolSpec("cancel"),
    )


def test_openllmetry_request_functions() -> None:
    attrs = {
        "llm.request.type": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.prompt.0.role": "user",
        "gen_ai.prompt.0.content": "Flights from ATL?",
        "llm.request.functions.0.name": "search_flights",
        "llm.request.functions.0.description": "Search flights",
        "llm.request.functions.0.parameters": json.dumps(SEARCH),
        "llm.request.functions.1.name": "",  # no name: skipped
    }
    step = must(normalize_span(span(attrs)))
    assert step.dialect == "openllmetry"
    assert step.tools_offered == (ToolSpec("search_flights", ("origin", "date")),)


@pytest.mark.parametrize(
    "hostile",
    [
        "{not json",
        '[1, 2, null, "x"]',
        json.dumps([{"name": ["not", "a", "name"]}, {"parameters": SEARCH}]),
        json.dumps([{"name": "t", "parameters": {"properties": ["a", "b"]}}]),
        json.dumps([{"name": "t", "parameters": '{"properties": 5}'}]),
        12345,
        ["a", "b"],
        "[" * 100_000,
    ],
)
def test_hostile_definitions_give_no_tools_or_what_holds(hostile: Any) -> None:
    step = must(normalize_span(span(_genai(hostile))))
    assert all(isinstance(spec, ToolSpec) and spec.name for spec in step.tools_offered)
    assert all(spec.parameters == () for spec in step.tools_offered)


def test_definitions_are_bounded() -> None:
    many = [
        {"name": f"tool_{i}", "parameters": {"properties": {f"p{j}": {} for j in range(70)}}}
        for i in range(tool_definitions.MAX_TOOLS + 50)
    ]
    specs = tool_definitions.from_document(json.dumps(many))
    assert len(specs) == tool_definitions.MAX_TOOLS
    assert {len(spec.parameters) for spec in specs} == {tool_definitions.MAX_PARAMETERS}
    too_long = json.dumps([{"name": "t", "description": "x" * tool_definitions.MAX_DOCUMENT}])
    assert tool_definitions.from_document(too_long) == ()
    # The same document on every call of a run is parsed once and shared.
    again = tool_definitions.from_document(json.dumps(many))
    assert again is specs
    # The cache keeps parsed names by digest, never the documents, and at most so many.
    for i in range(tool_definitions._CACHE_SIZE + 10):
        tool_definitions.from_document(json.dumps([{"name": f"t{i}"}]))
    assert len(tool_definitions._CACHE) == tool_definitions._CACHE_SIZE
    assert all(isinstance(key, bytes) and len(key) == 16 for key in tool_definitions._CACHE)
