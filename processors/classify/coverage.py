"""What a read checks: whether a read of one target looks at what a change of another changed.

The rule FM-3.2 and FM-3.3 count verification by. Decided for an SRE reading the run: the same
resource is checked by reading it (by its kind, or as another face of the same app: a
deployment's service, pods, rollout status; not a secret or config map of the same name), in a
namespace that agrees (the same one, or one side not saying it: kubectl's current namespace);
a workload by one of its pods; a pod by its workload; anything by a listing, in its own
namespace (`-A`: every namespace), of its kind, of `all`, or of the pods, which show a
workload's state and that of the config maps and secrets the pods run with. A listing with a
label selector checks only the apps it selects. Another deployment in the same namespace, the
same name in another namespace, a namespace's events or services, or pods with no namespace
said after a change in one, check nothing: the change stays unverified.
"""

from __future__ import annotations

from mast_otel.processors.classify.targets import POD_OWNERS, Target, kube_kind

# Kinds whose change shows in the pods of their namespace: workloads, and the configuration
# the pods read (a config map or secret is checked by the pods running with it).
_SHOWN_IN_PODS = POD_OWNERS | {"configmap", "secret"}


def _lists(listed: str, kind: str) -> bool:
    """A listing of `listed` shows the state of a resource of `kind`: the same kind, `all`, a
    kind not said on either side, the pods of a workload (or of the configuration they run
    with), a deployment's replica sets. Events, services, endpoints do not show a
    workload's state."""
    if not listed or not kind or listed == kind or listed == "all":
        return True
    if listed == "pod":
        return kind in _SHOWN_IN_PODS
    return listed == "replicaset" and kind == "deployment"


# Kinds named after the application they serve: a deployment, its pods, its service, its
# ingress and autoscaler share the app's name, and reading one by that name reads the app.
_APP_KINDS = POD_OWNERS | {
    "pod", "service", "ingress", "endpoints", "horizontalpodautoscaler", "poddisruptionbudget"
}  # fmt: skip


def _same_thing(changed: str, read: str) -> bool:
    """Two resources of one name are one thing: a kind not said, or not a Kubernetes kind (a
    table, a URL's collection), on either side; the same kind; or two faces of one app. A
    secret or a config map is not the deployment of its name."""
    if not changed or not read or changed == read:
        return True
    if not (kube_kind(changed) and kube_kind(read)):
        return True
    return changed in _APP_KINDS and read in _APP_KINDS


def _selects(values: tuple[str, ...], name: str) -> bool:
    """A label selector's values select a workload's pods: a value is its name, or one is the
    other's leading words (`app=payments` for deployment `payments-api`, and back)."""
    return any(v == name or name.startswith(v + "-") or v.startswith(name + "-") for v in values)


def _same_namespace(a: str, b: str) -> bool:
    """Two named resources' namespaces agree: equal, or one not said (kubectl's current
    namespace), or all namespaces."""
    return not a or not b or a == b or "*" in (a, b)


def covers(changed: Target, read: Target) -> bool:
    """A read of `read` looks at what a change of `changed` changed."""
    # A namespace created or deleted is checked by anything read in it, or by itself.
    if (
        changed.kind == "namespace"
        and changed.name
        and (
            read.namespace == changed.name
            or (read.name == changed.name and read.kind in ("namespace", ""))
        )
    ):
        return True
    if changed.name and read.name:
        if not _same_namespace(changed.namespace, read.namespace):
            return False
        if changed.name == read.name:
            return _same_thing(changed.kind, read.kind)
        # A pod of the changed workload (`checkout-7d9f-x2` of deployment `checkout`), or the
        # workload of a changed pod (a pod deleted, its deployment read).
        if read.kind == "pod" and changed.kind in POD_OWNERS:
            return read.name.startswith(changed.name + "-")
        return (
            changed.kind == "pod"
            and read.kind in POD_OWNERS
            and changed.name.startswith(read.name + "-")
        )
    if not read.name and (read.kind or read.namespace):
        # A listing covers only its own namespace (all of them with `-A`), and with a label
        # selector only the workloads it names.
        if read.namespace != changed.namespace and read.namespace != "*":
            return False
        if read.selector and changed.name and not _selects(read.selector, changed.name):
            return False
        return _lists(read.kind, changed.kind)
    if not changed.name and (changed.kind or changed.namespace) and read.name:
        # A change to a kind in a namespace (`delete pods --all -n shop`), read by name.
        return read.namespace == changed.namespace and _lists(changed.kind, read.kind)
    return False


def checks(changed: frozenset[Target], read: frozenset[Target]) -> bool:
    """Some resource the read names covers some resource the change named."""
    return any(covers(c, r) for c in changed for r in read)
