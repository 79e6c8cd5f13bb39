"""What a tool call does to the world, and which resources it touches.

"Mutating" means a call that changes the system (kubectl apply/patch/delete/scale/rollout
restart, helm upgrade, terraform apply, SQL writes, file writes, HTTP writes). The patterns are
configuration: the defaults cover common SRE tooling, and a team adds its own tools' names.
A call matching neither list is `UNKNOWN`, which detectors treat as not mutating.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache

DEFAULT_MUTATING_PATTERNS: tuple[str, ...] = (
    r"\bkubectl\s+(?:-\S+\s+\S+\s+)*(?:apply|patch|delete|scale|edit|replace|create|set|label|"
    r"annotate|cordon|uncordon|drain|taint|autoscale|expose)\b",
    r"\bkubectl\s+(?:-\S+\s+\S+\s+)*rollout\s+(?:restart|undo|pause|resume)\b",
    r"\bhelm\s+(?:install|upgrade|rollback|uninstall|delete)\b",
    r"\bterraform\s+(?:apply|destroy|import)\b",
    r"\b(?:INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|DROP\s+(?:TABLE|DATABASE|INDEX)|"
    r"ALTER\s+TABLE|TRUNCATE)\b",
    r"\bsystemctl\s+(?:restart|stop|start|reload|disable|enable)\b",
    r"\b(?:rm|mv|chmod|chown)\s+-?\w*\s*/",
    r'"method"\s*:\s*"(?:POST|PUT|PATCH|DELETE)"',
    # Tool names that say what they do: restart_deployment, k8s_patch, scale_service, ...
    r"^(?:\w+[_.-])?(?:apply|patch|delete|scale|restart|rollback|rollout_restart|create|update|"
    r"write|set|edit|deploy|remediate|remove|kill|evict|drain|cordon)(?:[_.-]\w+)?\b",
)

DEFAULT_READ_PATTERNS: tuple[str, ...] = (
    r"\bkubectl\s+(?:-\S+\s+\S+\s+)*(?:get|describe|logs|top|explain|events|api-resources|"
    r"version|auth\s+can-i)\b",
    r"\bkubectl\s+(?:-\S+\s+\S+\s+)*rollout\s+(?:status|history)\b",
    r"\bhelm\s+(?:list|status|get|history)\b",
    r"\bterraform\s+(?:plan|show|state\s+list)\b",
    r"\b(?:SELECT\s.+?\sFROM|SHOW\s+\w+|DESCRIBE\s+\w+|EXPLAIN\s+\w+)\b",
    r"^(?:\w+[_.-])?(?:get|list|describe|read|fetch|query|search|check|show|inspect|watch|logs?|"
    r"metrics?|alerts?|status|health|top|find|grep|cat|view|lookup)(?:[_.-]\w+)?\b",
)

# Argument keys whose values name the resource a call acts on.
DEFAULT_TARGET_KEYS: tuple[str, ...] = (
    "name",
    "resource_name",
    "target",
    "deployment",
    "pod",
    "service",
    "statefulset",
    "daemonset",
    "node",
    "namespace",
    "ns",
    "release",
    "table",
    "path",
    "file",
    "url",
    "host",
    "alert",
    "alertname",
)


class ActionKind(StrEnum):
    MUTATING = "mutating"
    READ = "read"
    UNKNOWN = "unknown"


@dataclass
class ClassifierConfig:
    """Which tool calls change the system and which only read it, and what they act on."""

    # Regular expressions (case-insensitive) over the tool name and arguments of a call that
    # changes the system.
    mutating_patterns: list[str] = field(default_factory=lambda: list(DEFAULT_MUTATING_PATTERNS))
    # Regular expressions over the tool name and arguments of a call that only reads.
    read_patterns: list[str] = field(default_factory=lambda: list(DEFAULT_READ_PATTERNS))
    # Argument keys whose values name the resource a call acts on.
    target_keys: list[str] = field(default_factory=lambda: list(DEFAULT_TARGET_KEYS))
    # Argument keys whose values change between otherwise identical calls (ids, clocks).
    volatile_argument_keys: list[str] = field(
        default_factory=lambda: [
            "timestamp",
            "time",
            "now",
            "request_id",
            "requestid",
            "nonce",
            "trace_id",
            "call_id",
            "idempotency_key",
        ]
    )
    # Text in tool results that changes between identical observations (clocks, ages).
    volatile_result_patterns: list[str] = field(
        default_factory=lambda: [
            r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?",
            r"\b\d+(?:\.\d+)?(?:ms|s|m|h|d)(?:\d+(?:s|m|h))?\b",
        ]
    )

    def validate(self) -> None:
        for key in ("mutating_patterns", "read_patterns", "volatile_result_patterns"):
            for pattern in getattr(self, key):
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ValueError(
                        f"classification.{key}: {pattern!r} is not a valid regular "
                        f"expression ({exc})"
                    ) from exc


@dataclass(frozen=True, slots=True)
class Action:
    kind: ActionKind
    targets: frozenset[str]


_KUBE_REF = re.compile(r"\b([a-z]+(?:\.[a-z]+)*)/([a-z0-9][a-z0-9.-]*)", re.IGNORECASE)
_NAMESPACE_FLAG = re.compile(r"(?:-n|--namespace)[=\s]+([a-z0-9][a-z0-9-]*)", re.IGNORECASE)
_KUBE_KINDS = (
    r"(?:deployments?|deploy|pods?|po|services?|svc|statefulsets?|sts|daemonsets?|ds|"
    r"replicasets?|rs|configmaps?|cm|secrets?|nodes?|no|ingress(?:es)?|ing|jobs?|cronjobs?|"
    r"cj|hpa|horizontalpodautoscalers?|pvc|persistentvolumeclaims?)"
)
_KUBE_VERB_TARGET = re.compile(
    r"\bkubectl\s+(?:-\S+\s+\S+\s+)*(?:rollout\s+)?\w+\s+"
    + _KUBE_KINDS
    + r"\s+([a-z0-9][a-z0-9.-]*)",
    re.IGNORECASE,
)


class ActionClassifier:
    """Classifies tool calls as mutating, read-only or unknown and extracts their targets."""

    def __init__(self, config: ClassifierConfig | None = None) -> None:
        self.config = config or ClassifierConfig()
        flags = re.IGNORECASE | re.MULTILINE
        self._mutating = [re.compile(p, flags) for p in self.config.mutating_patterns]
        self._read = [re.compile(p, flags) for p in self.config.read_patterns]
        self._target_keys = frozenset(k.lower() for k in self.config.target_keys)
        self._volatile_keys = frozenset(k.lower() for k in self.config.volatile_argument_keys)
        self._volatile_result = [re.compile(p) for p in self.config.volatile_result_patterns]
        # The same calls and results recur within and across runs; several detectors ask.
        self.classify = lru_cache(maxsize=4096)(self._classify)
        self.canonical_call = lru_cache(maxsize=4096)(self._canonical_call)
        self.result_fingerprint = lru_cache(maxsize=4096)(self._result_fingerprint)

    def _classify(self, tool_name: str, arguments: str) -> Action:
        # The command line (the tool's name followed by its arguments' text) decides first: a
        # generic `shell` or `kubectl` tool is whatever its command says; then the tool's name.
        parsed = _parse_json(arguments)
        command = _command_text(parsed) if parsed is not None else arguments
        kind = ActionKind.UNKNOWN
        for subject in (f"{tool_name} {command}", f"{tool_name}\n{arguments}"):
            if any(p.search(subject) for p in self._mutating):
                kind = ActionKind.MUTATING
                break
            if any(p.search(subject) for p in self._read):
                kind = ActionKind.READ
                break
        return Action(kind, self._targets(parsed, arguments))

    def _targets(self, parsed: object, arguments: str) -> frozenset[str]:
        targets: set[str] = set()
        # A Kubernetes manifest names its target in `kind` / `metadata`; its `apiVersion`
        # (`apps/v1`) looks like a `kind/name` reference and names nothing.
        manifests = _manifests(parsed if parsed is not None else arguments)
        for document in manifests:
            metadata = document.get("metadata")
            if isinstance(metadata, dict):
                for key in ("name", "namespace"):
                    value = metadata.get(key)
                    if isinstance(value, str) and value.strip():
                        targets.add(value.strip().lower())
        if isinstance(parsed, dict) and not (manifests and manifests[0] is parsed):
            for key, value in parsed.items():
                if str(key).lower() in self._target_keys and isinstance(value, str | int):
                    name = str(value).strip().lower()
                    if name:
                        targets.add(name.rsplit("/", 1)[-1] if "/" in name else name)
        text = _command_text(parsed) if parsed is not None else arguments
        if manifests:
            text = _API_VERSION_LINE.sub("", text)
        for _, name in _KUBE_REF.findall(text):
            targets.add(name.lower())
        for name in _KUBE_VERB_TARGET.findall(text):
            targets.add(name.lower())
        for namespace in _NAMESPACE_FLAG.findall(text):
            targets.add(namespace.lower())
        # A name at the end of a sentence keeps its full stop out ("deployment/checkout.").
        return frozenset(t.rstrip(".-") for t in targets if t.rstrip(".-"))

    def _canonical_call(self, tool_name: str, arguments: str) -> str:
        """The call with argument key order, whitespace and volatile fields removed, so that
        equivalent calls compare equal."""
        parsed = _parse_json(arguments)
        if parsed is None:
            body = " ".join(arguments.split())
        else:
            body = json.dumps(self._drop_volatile(parsed), sort_keys=True, separators=(",", ":"))
        return f"{tool_name}\x00{body}"

    def _result_fingerprint(self, result: str) -> str:
        """The result with clocks and ages blanked, so unchanged observations compare equal."""
        text = result
        for pattern in self._volatile_result:
            text = pattern.sub("#", text)
        return " ".join(text.split())

    def _drop_volatile(self, value: object) -> object:
        if isinstance(value, dict):
            return {
                k: self._drop_volatile(v)
                for k, v in value.items()
                if str(k).lower() not in self._volatile_keys
            }
        if isinstance(value, list):
            return [self._drop_volatile(v) for v in value]
        if isinstance(value, str):
            return " ".join(value.split())
        return value


_API_VERSION_LINE = re.compile(r'"?apiVersion"?\s*:\s*"?[\w./-]+"?', re.IGNORECASE)
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
        return json.loads(stripped)
    except (ValueError, RecursionError):
        return None


def _command_text(parsed: object) -> str:
    """The string values of parsed arguments, joined: where a command line would be."""
    if isinstance(parsed, dict):
        # A manifest's `apiVersion` (`apps/v1`) is no command and names no resource.
        return "\n".join(_command_text(v) for k, v in parsed.items() if k != "apiVersion")
    if isinstance(parsed, list):
        return " ".join(_command_text(v) for v in parsed)
    if isinstance(parsed, str):
        return parsed
    return ""
