"""Values as the store holds them: attribute values as text (as the OpenTelemetry Collector's
ClickHouse exporter writes them: strings; arrays and maps as JSON), attribute maps as Arrow map
columns, and SQL string literals."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from mast_otel.processors.records import AttrValue


def attr_to_str(value: AttrValue) -> str:
    """An attribute value as the ClickHouse exporter stores it."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if value is None:
        return ""
    return json.dumps(_jsonable(value), ensure_ascii=False, separators=(",", ":"))


def _jsonable(value: AttrValue) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    return value


def str_map(attributes: dict[str, AttrValue]) -> list[tuple[str, str]]:
    return [(key, attr_to_str(value)) for key, value in attributes.items()]


def map_array(maps: Iterable[dict[str, AttrValue]]) -> pa.Array:
    """A Map(String, String) column from attribute maps, built from flat key and value lists
    and offsets: pyarrow converts those in C, where a list of pairs per row costs a Python
    tuple per attribute."""
    offsets = [0]
    keys: list[str] = []
    values: list[str] = []
    for attributes in maps:
        keys.extend(attributes)
        values.extend(v if type(v) is str else attr_to_str(v) for v in attributes.values())
        offsets.append(len(keys))
    return pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()), pa.array(keys, pa.string()), pa.array(values, pa.string())
    )


def map_lists(lists: Iterable[list[dict[str, AttrValue]]]) -> pa.Array:
    """A column of lists of attribute maps (events' or links' attributes)."""
    offsets = [0]
    flat: list[dict[str, AttrValue]] = []
    for maps in lists:
        flat.extend(maps)
        offsets.append(len(flat))
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), map_array(flat))


def sql_string(value: str) -> str:
    """A ClickHouse string literal (quotes and backslashes escaped)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
