"""The resources a call's arguments name, structured (`targets.Target`) and as flat names.

Read from the keys that name a resource (`target_keys`, and keys ending in a
`target_key_suffixes` entry such as `reservation_id`), the namespace keys, a kind key
(`{"kind": "Deployment", "name": "payments-api"}`, `resource_type`) and the tool's name
(`restart_deployment`, `kubectl_get_pods`); and from a command's argv (`command_targets`).
A value written as people write a resource (`deployment/payments-api -n payments`, `pods -n
payments`, `svc/checkout`, a URL, a SQL table `payments.invoices`) is parsed; any other value
is a plain name, as it always was (the part after its last `/`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from functools import lru_cache

from mast_otel.processors.classify.arguments import name_words
from mast_otel.processors.classify.targets import (
    MAX_TARGETS,
    MAX_TOKENS,
    Target,
    kind_word,
    kube_kind,
    kubectl_targets,
    parse_resource,
    parse_url,
    selector_values,
)
from mast_otel.processors.classify.vocabulary import DEFAULT_KIND_KEYS, DEFAULT_NAMESPACE_KEYS

# SQL past this many characters is read for its first ones only.
MAX_SQL = 8192

# Keys whose value may be a resource written as people write it (`deployment/x -n y`).
_RESOURCE_KEYS = frozenset({"resource", "resources", "resource_name", "target", "name"})
# Of those, the keys that give a name alone.
_NAME_KEYS = frozenset({"name", "resource_name"})
# Of those, the keys where a kind alone (`pods`) is a listing of that kind.
_LISTING_KEYS = frozenset({"resource", "resources"})
# Keys of a label selector narrowing a listing.
_SELECTOR_KEYS = ("selector", "label_selector", "labelselector", "labels")
# Words of a tool's name that say it speaks to Kubernetes.
_KUBE_WORDS = frozenset({"kubectl", "k8s", "kube", "kubernetes", "oc", "openshift", "helm"})
# A SQL statement given as the command (`run_sql` with `{"query": "UPDATE ..."}`), and the
# clients that run one given with `-c`, `-e`, `--query`.
_SQL_PROGRAMS = frozenset(
    {"select", "update", "insert", "delete", "with", "drop", "alter", "truncate", "merge",
     "replace", "upsert"}
)  # fmt: skip
_SQL_CLIENTS = frozenset(
    {"psql", "mysql", "mariadb", "sqlite3", "duckdb", "clickhouse", "clickhouse-client", "bq",
     "sqlcmd", "snowsql", "cockroach", "trino", "presto"}
)  # fmt: skip
# Plain-named kinds of other keys.
_KEY_KINDS = {"table": "table", "release": "release", "alert": "alert", "alertname": "alert"}


def _plain(text: str) -> str:
    """A value as a flat name: lower-cased, the part after its last `/`, no full stop."""
    lowered = text.strip().lower()
    return (lowered.rsplit("/", 1)[-1] if "/" in lowered else lowered).rstrip(".-")


@lru_cache(maxsize=1024)
def _tool_kind(tool_name: str) -> tuple[str, bool]:
    """The kind a tool's name gives (`restart_deployment`, `kubectl_get_pods`; full words
    only), and whether the name says it speaks to Kubernetes (`kubectl_`, `k8s_`)."""
    words = name_words(tool_name)
    kind = next((k for k in (kube_kind(w, short=False) for w in reversed(words)) if k), "")
    return kind, bool(_KUBE_WORDS.intersection(words))


def _string(value: object) -> str:
    if isinstance(value, str | int) and not isinstance(value, bool):
        return str(value).strip()
    return ""


def argument_targets(
    parsed: dict[object, object],
    tool_name: str,
    target_keys: Collection[str],
    suffixes: tuple[str, ...],
    namespace_keys: Sequence[str] = DEFAULT_NAMESPACE_KEYS,
    kind_keys: Sequence[str] = DEFAULT_KIND_KEYS,
) -> tuple[set[str], set[Target]]:
    """The flat names and the structured targets of a call's arguments (a JSON object): the
    values of `target_keys` (and keys ending in one of `suffixes`), in the namespace the first
    of `namespace_keys` present gives, of the kind the first of `kind_keys` gives."""
    keys = {str(k).lower(): v for k, v in list(parsed.items())[:256]}
    named = [k for k in keys if k in target_keys or k == "id" or k.endswith(suffixes)]
    namespace = next(
        (_plain(_string(keys[k])) for k in namespace_keys if k in keys and _string(keys[k])), ""
    )
    if not named and not namespace:
        return set(), set()
    kind_only: set[str] = set()
    default_kind, kube = "", False
    narrowed: tuple[str, ...] = ()
    if namespace or any(
        k in _RESOURCE_KEYS or (k in target_keys and kube_kind(k, short=False)) for k in named
    ):
        # A resource that may be Kubernetes': its kind, and a label selector narrowing a listing.
        hinted = ""
        for key in (k for k in kind_keys if k in keys):
            text = _string(keys[key])
            hinted = hinted or kube_kind(text) or (kind_word(text) if key == "kind" else "")
        # `{"resource": "deployment", "name": "payments-api"}`: the resource key gives the kind
        # of the name beside it, not a listing of every deployment.
        kind_only = {
            key
            for key in _LISTING_KEYS
            if key in keys and kube_kind(_string(keys[key])) and " " not in _string(keys[key])
        }
        if kind_only and any(
            _string(keys[k]) for k in keys if k in _NAME_KEYS or kube_kind(k, short=False)
        ):
            hinted = hinted or kube_kind(_string(keys[min(kind_only)]))
        else:
            kind_only = set()
        named_kind, kube_words = _tool_kind(tool_name)
        default_kind = hinted or named_kind
        kube = bool(default_kind or namespace or kube_words)
        for key in (k for k in _SELECTOR_KEYS if k in keys):
            narrowed = narrowed or selector_values(_string(keys[key]))
    flat: set[str] = set()
    refs: set[Target] = set()
    named_resource = False
    for key in named:
        if key in kind_only:
            continue
        value = keys[key]
        for item in (value if isinstance(value, list) else [value])[:64]:
            text = _string(item)
            if not text or len(text) > 256:
                continue
            if key in namespace_keys:
                flat.add(_plain(text))
                continue
            key_kind = (
                kube_kind(key, short=False)
                if key in target_keys and key not in _RESOURCE_KEYS
                else ""
            )
            if text[:8].lower().startswith(("http://", "https://")) or key == "url":
                url = parse_url(text)
                if url is not None:
                    refs.add(url)
                    flat.add(url.name.rstrip(".-"))
                    continue
            if key == "table":
                parts = [p.strip().strip('`"').lower() for p in text.split(".")]
                if parts[-1]:
                    refs.add(Target("table", parts[-1], parts[-2] if len(parts) > 1 else ""))
                    flat.update(p for p in parts[-2:] if p)
                    continue
            if key_kind or key in _LISTING_KEYS or (key in _RESOURCE_KEYS and kube):
                found = parse_resource(
                    text,
                    kind=key_kind or default_kind,
                    namespace=namespace,
                    listing=key in _LISTING_KEYS,
                )
                if found:
                    refs.update(
                        Target(t.kind, t.name, t.namespace, t.selector or narrowed)
                        if not t.name
                        else t
                        for t in found
                    )
                    flat.update(w for t in found for w in t.words())
                    named_resource = True
                    continue
            name = _plain(text)
            if not name:
                continue
            flat.add(name)
            if key_kind or key in _RESOURCE_KEYS:
                refs.add(Target(key_kind or default_kind, name, namespace))
                named_resource = named_resource or bool(key_kind or kube)
            else:
                refs.add(Target(_KEY_KINDS.get(key, ""), name, namespace))
    if namespace and not named_resource:
        # Only a namespace (and perhaps a kind): the call lists or checks what is in it.
        refs.add(Target(default_kind, "", namespace, narrowed))
    return flat, refs


# A table after the words that introduce one; names quoted or not, up to three parts.
_SQL_PART = r"(?:`[^`\n]{1,128}`|\"[^\"\n]{1,128}\"|\[[^\]\n]{1,128}\]|[A-Za-z_][\w$]{0,127})"
_SQL_TABLE = re.compile(
    r"\b(FROM|JOIN|UPDATE|INTO|TABLE|TRUNCATE(?:\s+TABLE)?)\s+"
    r"(?:IF\s+(?:NOT\s+)?EXISTS\s+|ONLY\s+)?"
    rf"({_SQL_PART}(?:\s*\.\s*{_SQL_PART}){{0,2}})",
    re.IGNORECASE,
)
_SQL_KEYWORDS = frozenset(
    {"select", "set", "values", "where", "table", "only", "lateral", "unnest", "dual", "if"}
)


def sql_tables(statement: str) -> tuple[Target, ...]:
    """The tables a SQL statement names: `UPDATE orders SET ...` orders, `SELECT * FROM
    payments.invoices JOIN t ON ...` invoices (schema payments) and t."""
    found: list[Target] = []
    for match in _SQL_TABLE.finditer(statement[:MAX_SQL]):
        parts = [p.strip().strip('`"[]').lower() for p in match.group(2).split(".")]
        if not parts or not parts[-1] or parts[-1] in _SQL_KEYWORDS:
            continue
        target = Target("table", parts[-1], parts[-2] if len(parts) >= 2 else "")
        if target not in found:
            found.append(target)
        if len(found) >= MAX_TARGETS:
            break
    return tuple(found)


def command_targets(words: list[str]) -> set[Target]:
    """The resources one command (its argv, redirections removed) names, structured: a kubectl
    argv's `kind/name`, namespace and selector (also when another program runs it: `watch
    kubectl get pods -n shop`); the tables of SQL."""
    program = words[0].rsplit("/", 1)[-1].lower() if words else ""
    if program in _SQL_PROGRAMS or program in _SQL_CLIENTS:
        return set(sql_tables(" ".join(words)))
    if program == "oc":
        return set(kubectl_targets(words))
    for position, word in enumerate(words[:MAX_TOKENS]):
        if word.rsplit("/", 1)[-1].lower() in ("kubectl", "kubectl.exe"):
            return set(kubectl_targets(words[position:]))
    return set()


def manifest_targets(document: dict[str, object]) -> tuple[set[str], set[Target]]:
    """The flat names and the target of a Kubernetes object (`kind`, `metadata.name`,
    `metadata.namespace`)."""
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        return set(), set()
    found = {}
    for key in ("name", "namespace"):
        value = metadata.get(key)
        if isinstance(value, str) and value.strip():
            found[key] = value.strip().lower()
    kind = str(document.get("kind", ""))
    target = Target(
        kube_kind(kind) or kind_word(kind),
        found.get("name", "").rstrip(".-"),
        found.get("namespace", ""),
    )
    return set(found.values()), {target}
