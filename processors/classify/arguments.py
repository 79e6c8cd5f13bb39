"""What a call's arguments hold: parsed JSON (an envelope unwrapped), the command they give,
the files a patch names, Kubernetes manifests and `kind/name` references, and the words of a
tool's name."""

from __future__ import annotations

import json
import re

from mast_otel.processors.classify.targets import prose_targets

_ENVELOPES = frozenset({"inputs", "input", "kwargs", "arguments", "params", "parameters"})

_KUBE_REF = re.compile(r"\b([a-z]+(?:\.[a-z]+)*)/([a-z0-9][a-z0-9.-]*)", re.IGNORECASE)
_NAME_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_PATCH_FILE = re.compile(
    r"^\*\*\* (?:Update|Add|Delete) File:\s*(\S.*?)\s*$|^\*\*\* Move to:\s*(\S.*?)\s*$",
    re.MULTILINE,
)


def mentioned_targets(text: str) -> frozenset[str]:
    """Resources a message names in prose (`deployment/checkout`, a quoted kubectl command,
    `-n shop`), as flat names: `targets.prose_targets`."""
    return frozenset(
        w.rstrip(".-") for t in prose_targets(text) for w in t.words() if w.rstrip(".-")
    )


def name_words(tool_name: str) -> list[str]:
    """The lower-cased words of a tool name: `book_reservation`, `sendEmail`,
    `crm.update-ticket` give [book, reservation], [send, email], [crm, update, ticket]."""
    return [w.lower() for w in _NAME_WORD.findall(tool_name)]


_MANIFEST_START = re.compile(r"^(?:---\s*\n)?\s*(?:apiVersion|kind)\s*:", re.MULTILINE)
_HEREDOC_END = re.compile(r"^\s*EOF\s*$", re.MULTILINE)
# A manifest of more documents than this is read for its first ones only.
MAX_MANIFEST_DOCUMENTS = 32


def _manifests(value: object) -> list[dict[str, object]]:
    """Kubernetes objects (`kind` and `metadata`) among the arguments: the parsed arguments
    themselves, or a string argument holding YAML or JSON documents."""
    if isinstance(value, dict):
        if "kind" in value and isinstance(value.get("metadata"), dict):
            return [value]
        found: list[dict[str, object]] = []
        for item in value.values():
            found.extend(_manifests(item))
        return found
    if isinstance(value, list):
        return [m for item in value for m in _manifests(item)]
    if not isinstance(value, str) or "apiVersion" not in value or "kind" not in value:
        return []
    import yaml

    documents: list[dict[str, object]] = []
    start = _MANIFEST_START.search(value)
    if start is None:
        return documents
    # A manifest inside a command (`kubectl apply -f - <<EOF ... EOF`): its YAML part.
    text = value[start.start() :]
    end = _HEREDOC_END.search(text)
    if end is not None:
        text = text[: end.start()]
    try:
        for i, document in enumerate(yaml.safe_load_all(text)):
            if i >= MAX_MANIFEST_DOCUMENTS:
                break
            if isinstance(document, dict) and "kind" in document:
                if isinstance(document.get("metadata"), dict):
                    documents.append(document)
                elif document.get("kind") == "List" and isinstance(document.get("items"), list):
                    documents.extend(_manifests(document["items"]))
    except (yaml.YAMLError, RecursionError, ValueError):
        return documents
    return documents


def _parse_json(text: str) -> object | None:
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        parsed = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    # An envelope around the arguments (OpenLLMetry's `{"inputs": {...}}`, `{"kwargs": ...}`).
    while isinstance(parsed, dict) and len(parsed) == 1:
        ((key, inner),) = parsed.items()
        if str(key).lower() not in _ENVELOPES or not isinstance(inner, dict):
            break
        parsed = inner
    return parsed


def _command_value(parsed: object, keys: frozenset[str] | tuple[str, ...]) -> object | None:
    """The value of the first command key of the arguments (a string or an argv list)."""
    if isinstance(parsed, dict):
        for key, value in parsed.items():
            if str(key).lower() in keys and isinstance(value, str | list) and value:
                return value
    return None


def _patch_paths(patch: str) -> frozenset[str]:
    """The files an `apply_patch` patch names in its headers."""
    return frozenset(
        _path_target(a or b) for a, b in _PATCH_FILE.findall(patch) if (a or b).strip()
    )


def _path_target(path: str) -> str:
    return path.strip().strip("'\"").lower()
