"""Resources as people write them, made structured: a `Target` is a kind, a name and a
namespace.

One parser for the free-form strings tool arguments and commands carry:
- Kubernetes references: `deployment/payments-api -n payments`, `deploy payments-api
  --namespace=payments`, `svc/checkout`, `pods -n payments` (a listing: a kind, no name), a
  kubectl argv (`kubectl rollout restart deploy/x -n y`, `kubectl get pods -l app=x -A`);
  kind aliases are unified (`deploy`, `deployments`, `Deployment`, `deployment.apps` are
  `deployment`; `svc` is `service`, `po` and `pods` are `pod`, `cm` is `configmap` ...);
- URLs: `https://api.example.com/v1/orders/123` is `123` of kind `orders` on that host;
- SQL: the tables a statement reads or writes (`UPDATE orders SET ...`, `SELECT * FROM
  payments.invoices`: `invoices` in schema `payments`), in resources.py.

Every input is bounded (`MAX_TEXT`, `MAX_TOKENS`, `MAX_TARGETS`), every pattern is linear, and
nothing here raises on any string.

What a read checks of a change is in coverage.py.
"""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import unquote, urlsplit

# Longer free-form strings are not parsed (a value this long is prose or a document).
MAX_TEXT = 512
# At most this many words of a string or argv are read, and this many targets kept.
MAX_TOKENS = 64
MAX_TARGETS = 32


class Target(NamedTuple):
    """A resource: its kind (canonical, `""` when unknown), its name (`""` for a listing of
    the kind) and its namespace (`""` when not said, `"*"` for all namespaces); a listing
    narrowed by a label selector keeps the selector's values (`app=checkout`: `checkout`)."""

    kind: str = ""
    name: str = ""
    namespace: str = ""
    selector: tuple[str, ...] = ()

    def words(self) -> tuple[str, ...]:
        """The flat names it gives (its name and its namespace)."""
        return tuple(w for w in (self.name, self.namespace) if w and w != "*")


# --- Kubernetes kinds --------------------------------------------------------------------------

# Canonical kind, then its plural and short names (kubectl's own aliases).
_KINDS: dict[str, tuple[str, ...]] = {
    "pod": ("pods", "po"),
    "deployment": ("deployments", "deploy"),
    "replicaset": ("replicasets", "rs"),
    "statefulset": ("statefulsets", "sts"),
    "daemonset": ("daemonsets", "ds"),
    "job": ("jobs",),
    "cronjob": ("cronjobs", "cj"),
    "replicationcontroller": ("replicationcontrollers", "rc"),
    "service": ("services", "svc"),
    "ingress": ("ingresses", "ing"),
    "endpoints": ("endpoint", "ep"),
    "configmap": ("configmaps", "cm"),
    "secret": ("secrets",),
    "namespace": ("namespaces", "ns"),
    "node": ("nodes", "no"),
    "persistentvolumeclaim": ("persistentvolumeclaims", "pvc"),
    "persistentvolume": ("persistentvolumes", "pv"),
    "horizontalpodautoscaler": ("horizontalpodautoscalers", "hpa"),
    "poddisruptionbudget": ("poddisruptionbudgets", "pdb"),
    "serviceaccount": ("serviceaccounts", "sa"),
    "networkpolicy": ("networkpolicies", "netpol"),
    "event": ("events", "ev"),
    "role": ("roles",),
    "rolebinding": ("rolebindings",),
    "clusterrole": ("clusterroles",),
    "clusterrolebinding": ("clusterrolebindings",),
    "storageclass": ("storageclasses", "sc"),
    "customresourcedefinition": ("customresourcedefinitions", "crd", "crds"),
    "all": (),
}
_KIND_OF: dict[str, str] = {}
for _canonical, _aliases in _KINDS.items():
    _KIND_OF[_canonical] = _canonical
    for _alias in _aliases:
        _KIND_OF[_alias] = _canonical
# Short names that are also words of prose or of tool names: a kind only where kubectl's
# grammar puts a kind (after its verb, before `/`), never as a word of a tool's name.
_SHORT = frozenset(a for a in _KIND_OF if len(a) <= 3 and a not in ("pod", "job"))

# Kinds whose pods a pod listing shows (what a workload's health is read from).
POD_OWNERS = frozenset(
    {"deployment", "statefulset", "daemonset", "replicaset", "job", "cronjob",
     "replicationcontroller"}
)  # fmt: skip

_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,252}")
_KIND_WORD = re.compile(r"[a-z][a-z0-9]{0,62}(?:\.[a-z0-9-]{1,63}){0,6}")


def kube_kind(word: str, short: bool = True) -> str:
    """The canonical kind a word names (`deploy`, `Deployments`, `deployment.apps`,
    `deployments.v1.apps`: `deployment`), or `""` when it names none; `short=False` leaves out
    the short names (`no`, `ns`, `po` ...)."""
    lowered = word.strip().lower()
    if not lowered or len(lowered) > 128:
        return ""
    head = lowered.split(".", 1)[0]
    if not short and head in _SHORT:
        return ""
    return _KIND_OF.get(head, "")


def _name(token: str) -> str:
    """A resource name as written (quotes and a trailing full stop or comma dropped), or `""`
    when the token cannot be one."""
    text = token.strip().strip("'\"`").rstrip(".,;").lower()
    return text if _NAME.fullmatch(text) else ""


def selector_values(selector: str) -> tuple[str, ...]:
    """The values a label selector asks for: `app=checkout,tier in (web)` gives checkout."""
    values = []
    for part in selector[:MAX_TEXT].split(",")[:MAX_TOKENS]:
        _, sep, value = part.partition("=")
        value = value.lstrip("=").strip().strip("'\"").lower()
        if sep and value and _NAME.fullmatch(value):
            values.append(value)
    return tuple(sorted(set(values)))


# --- kubectl argv ------------------------------------------------------------------------------

# Flags that take the next word as their value (when not written `--flag=value`).
_VALUE_FLAGS = frozenset(
    {"-n", "--namespace", "-l", "--selector", "-o", "--output", "-c", "--container",
     "--context", "--cluster", "--user", "--kubeconfig", "-f", "--filename", "-k",
     "--kustomize", "-p", "--patch", "--type", "--field-selector", "--sort-by", "--tail",
     "--since", "--since-time", "--timeout", "--image", "--replicas", "--template", "-L",
     "--label-columns", "--for", "--to-revision", "--limits", "--requests", "--from-literal",
     "--from-file", "--from-env-file", "--current-replicas", "--max-log-requests", "--port",
     "--target-port", "--name", "--min", "--max", "--cpu-percent", "--grace-period", "-s",
     "--server", "--token", "--as", "--as-group", "--request-timeout", "--env", "-e",
     "--overrides", "--restart", "--schedule", "--field-manager", "--subresource"}
)  # fmt: skip
# Verbs whose first operand is a pod (or `kind/name`), the rest a command or ports.
_POD_VERBS = frozenset({"logs", "log", "exec", "attach", "port-forward", "cp", "debug"})
# Verbs that take a sub-verb before their operands (`rollout restart`, `set image`).
_SUB_VERBS = frozenset({"rollout", "set", "auth", "config", "certificate", "plugin"})
# Verbs whose operands are not resources.
_NO_OPERANDS = frozenset(
    {"explain", "api-resources", "api-versions", "version", "cluster-info", "auth", "config",
     "certificate", "plugin", "completion", "proxy", "kustomize", "options", "diff"}
)  # fmt: skip
_SECRET_TYPES = frozenset({"generic", "tls", "docker-registry"})


def _flags(tokens: list[str]) -> tuple[list[str], str, tuple[str, ...], list[str]]:
    """Operands, namespace, selector values and files of a kubectl argv's words."""
    # `kubectl logs -f` follows: there `-f` takes no file.
    follows = any(t in ("logs", "log") for t in tokens[:8])
    operands: list[str] = []
    namespace = ""
    selector: tuple[str, ...] = ()
    files: list[str] = []
    position = 0
    while position < len(tokens):
        token = tokens[position]
        position += 1
        if token == "--":
            break  # the command `exec` runs
        if not token.startswith("-") or token == "-":
            operands.append(token)
            continue
        flag, eq, value = token.partition("=")
        if not eq and len(flag) > 2 and flag[1] in "nl" and flag[:2] in ("-n", "-l"):
            flag, value, eq = flag[:2], flag[2:], "="  # `-npayments`
        if not eq and flag in _VALUE_FLAGS and position < len(tokens):
            if flag == "-f" and follows:
                continue
            value = tokens[position]
            position += 1
        if flag in ("-n", "--namespace"):
            namespace = _name(value) or namespace
        elif flag in ("-A", "--all-namespaces"):
            namespace = "*"
        elif flag in ("-l", "--selector"):
            selector = selector_values(value)
        elif flag in ("-f", "--filename") and value and value != "-":
            files.append(value.strip().strip("'\"").lower())
    return operands, namespace, selector, files


def _operand_targets(
    operands: list[str], namespace: str, selector: tuple[str, ...], default_kind: str = ""
) -> list[Target]:
    """Targets of kubectl operands: `kind/name ...`, `kind[,kind] [name ...]`, or names of
    `default_kind` (a kind the caller already knows)."""
    found: list[Target] = []
    if not operands:
        if default_kind:
            found.append(Target(default_kind, "", namespace, selector))
        return found
    if "/" in operands[0]:
        for operand in operands:
            kind, slash, name = operand.partition("/")
            canonical = kube_kind(kind) or (kind_word(kind) if slash else "")
            if slash and canonical and _name(name):
                found.append(Target(canonical, _name(name), namespace))
        return found
    kinds = [kube_kind(k) or kind_word(k) for k in operands[0].split(",") if k]
    names = operands[1:]
    if not all(kinds) or not kinds:
        # The first operand is a name: the kind came with the call (`{"deployment": ...}`).
        kinds, names = [default_kind], operands
    named = [_name(n) for n in names if "=" not in n and not n.endswith(("-", ":"))]
    for kind in kinds:
        if any(named):
            found.extend(Target(kind, n, namespace) for n in named if n)
        else:
            found.append(Target(kind, "", namespace, selector))
    return found


def kind_word(word: str) -> str:
    """A kind kubectl would take that is not among the built-in ones (a custom resource:
    `rollouts.argoproj.io`, `VirtualService`): its first word, lower-cased."""
    lowered = word.strip().lower()
    if not _KIND_WORD.fullmatch(lowered):
        return ""
    return lowered.split(".", 1)[0]


def kubectl_targets(argv: list[str]) -> tuple[Target, ...]:
    """The resources a kubectl argv (its program first or not) acts on or reads: `kubectl -n
    shop rollout restart deploy/checkout`, `kubectl get pods -l app=checkout`, `kubectl logs
    checkout-7d9 -n shop`, `kubectl apply -f k8s/app.yaml` (the file)."""
    tokens = [str(t) for t in argv[:MAX_TOKENS]]
    if tokens and tokens[0].rsplit("/", 1)[-1].lower() in ("kubectl", "kubectl.exe", "oc"):
        tokens = tokens[1:]
    operands, namespace, selector, files = _flags(tokens)
    found: list[Target] = [Target("file", f) for f in files if f]
    if not operands:
        return tuple(found[:MAX_TARGETS])
    verb = operands[0].lower()
    rest = operands[1:]
    if verb in _SUB_VERBS and rest:
        rest = rest[1:]  # `rollout restart`, `set image`
    if verb in _NO_OPERANDS:
        return tuple(found[:MAX_TARGETS])
    if verb in _POD_VERBS:
        first = rest[0] if rest else ""
        if "/" in first:
            found.extend(_operand_targets([first], namespace, ()))
        elif _name(first) and ":" not in first:
            found.append(Target("pod", _name(first), namespace))
        return tuple(found[:MAX_TARGETS])
    if verb == "events":
        found.append(Target("event", "", namespace))
        return tuple(found[:MAX_TARGETS])
    if verb in ("cordon", "uncordon", "drain"):
        found.extend(Target("node", _name(n)) for n in rest if _name(n))
        return tuple(found[:MAX_TARGETS])
    if verb == "create" and len(rest) >= 2 and "/" not in rest[0]:
        kind = kube_kind(rest[0]) or kind_word(rest[0])
        names = rest[2:] if kind == "secret" and rest[1].lower() in _SECRET_TYPES else rest[1:]
        if kind and names and _name(names[0]):
            found.append(Target(kind, _name(names[0]), "" if kind == "namespace" else namespace))
        return tuple(found[:MAX_TARGETS])
    if verb == "top" and rest:
        kind = kube_kind(rest[0])
        names = [_name(n) for n in rest[1:2] if _name(n)]
        if kind:
            found.append(Target(kind, names[0] if names else "", namespace, selector))
        return tuple(found[:MAX_TARGETS])
    found.extend(_operand_targets(rest, namespace, selector))
    return tuple(found[:MAX_TARGETS])


# --- free-form strings -------------------------------------------------------------------------


def parse_resource(
    text: str, kind: str = "", namespace: str = "", listing: bool = False
) -> tuple[Target, ...]:
    """The resources a free-form string names, or `()` when it is not written as one (a plain
    name, prose): `deployment/payments-api -n payments`, `deploy payments-api
    --namespace=payments`, `svc/checkout`, `pods -n payments`, a URL. `kind` and `namespace`
    are what the call said besides (`{"deployment": "x", "namespace": "y"}`); with `listing`,
    a kind alone (`pods`) is a listing of that kind."""
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_TEXT:
        return ()
    stripped = text.strip()
    if stripped[:8].lower().startswith(("http://", "https://")):
        target = parse_url(stripped)
        return (target,) if target is not None else ()
    tokens = stripped.split()[:MAX_TOKENS]
    if tokens[0].lower() in ("kubectl", "oc"):
        return kubectl_targets(tokens)
    operands, flag_namespace, selector, _ = _flags(tokens)
    namespace = flag_namespace or (_name(namespace) if namespace else "")
    has_flag = len(operands) < len(tokens)
    if not operands:
        return (Target(kind, "", namespace, selector),) if (has_flag and namespace) else ()
    first = operands[0]
    head = first.split("/", 1)[0].split(",", 1)[0]
    kind_first = kube_kind(head)
    if "/" in first:
        # A custom kind is group-qualified (`rollouts.argoproj.io/canary`) or written as
        # its Kind (`VirtualService/reviews`); `src/app.py` is a path.
        custom = "." in head or head[:1].isupper()
        if not (kind_first or (custom and kind_word(head))) or first.count("/") != 1:
            return ()
        found = _operand_targets(operands, namespace, selector)
        if len(found) != len(operands):
            return ()  # words besides the references: prose
    elif kind_first and (len(operands) == 2 or has_flag or (listing and len(operands) == 1)):
        # `deploy payments-api`, `pods -n payments`; more words without a flag are prose.
        if not all(_name(o) for o in operands[1:]) or len(operands) > 8:
            return ()
        found = _operand_targets(operands, namespace, selector)
    elif has_flag and len(operands) == 1 and _name(first):
        found = [Target(kind, _name(first), namespace)]
    else:
        return ()
    return tuple(found[:MAX_TARGETS])


# Prose past this many characters is read for its first ones only.
MAX_PROSE = 8192
_QUOTES = "`'\"()[]{}<>,;:!?*"


def prose_targets(text: str) -> tuple[Target, ...]:
    """The resources a message names in prose (a hand-off's brief, a plan): `kind/name`
    references of known kinds (`deployment/checkout`, `svc/cart.`), kubectl commands quoted in
    it (`kubectl rollout restart deploy checkout -n shop`, to the end of their sentence), and
    `-n shop` / `--namespace shop` as namespaces."""
    raw = text[:MAX_PROSE].split()[: MAX_TOKENS * 8]
    tokens = [t.strip(_QUOTES) for t in raw]
    found: list[Target] = []
    position = 0
    while position < len(tokens) and len(found) < MAX_TARGETS:
        token = tokens[position]
        lowered = token.lower()
        if lowered == "kubectl":
            end = position + 1
            while end < len(tokens) and end - position < MAX_TOKENS:
                if raw[end].endswith((".", ";", "`", ")")) or raw[end].startswith("`"):
                    break
                end += 1
            found.extend(kubectl_targets(tokens[position : end + 1]))
            position = end + 1
            continue
        if "/" in token and kube_kind(token.split("/", 1)[0]):
            # Only kinds kubectl knows: prose writes `Read/write`, `and/or`.
            found.extend(parse_resource(token.rstrip(".")))
        elif lowered in ("-n", "--namespace") and position + 1 < len(tokens):
            if _name(tokens[position + 1]):
                found.append(Target("", "", _name(tokens[position + 1])))
            position += 1
        elif lowered.startswith("--namespace=") and _name(lowered.partition("=")[2]):
            found.append(Target("", "", _name(lowered.partition("=")[2])))
        position += 1
    return tuple(found[:MAX_TARGETS])


def parse_url(text: str) -> Target | None:
    """A URL as a target: its last path segment the name, the one before it the kind, its
    host the namespace (`https://api.example.com/v1/orders/123`: orders `123` on
    api.example.com); query and fragment left out. None when it is not an http(s) URL."""
    if len(text) > 2048:
        return None
    try:
        parts = urlsplit(text.strip())
        host = (parts.hostname or "").lower()
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not host:
        return None
    segments = [unquote(s).strip().lower() for s in parts.path.split("/") if s.strip()]
    segments = [s for s in segments[:MAX_TOKENS] if s]
    if not segments:
        return Target("host", host)
    kind = segments[-2] if len(segments) >= 2 else ""
    return Target(kind, segments[-1][:256], host)
