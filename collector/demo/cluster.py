"""A tiny simulated Kubernetes cluster the demo agent acts on, so tool results are real
consequences of the agent's calls (a restart changes what `get pods` returns)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field


@dataclass
class Deployment:
    name: str
    namespace: str
    replicas: int = 2
    healthy: bool = True
    fault: str = ""
    generation: int = 1
    # Status checks left before a restarted rollout reports done (a rollout in progress).
    rollout_pending: int = 0


@dataclass
class Cluster:
    deployments: dict[str, Deployment] = field(default_factory=dict)
    alerts: dict[str, str] = field(default_factory=dict)

    @classmethod
    def incident(cls, variant: str = "") -> Cluster:
        """checkout in shop crash-loops; HighErrorRate fires. Variant "dependency": its logs
        blame the payments service in billing instead of its own memory limit."""
        cluster = cls()
        fault = (
            "upstream payments.billing:8080 timed out"
            if variant == "dependency"
            else "OOMKilled: memory limit 64Mi too low"
        )
        cluster.deployments["checkout"] = Deployment("checkout", "shop", healthy=False, fault=fault)
        cluster.deployments["cart"] = Deployment("cart", "shop")
        cluster.deployments["payments"] = Deployment("payments", "billing")
        cluster.deployments["checkout-staging"] = Deployment("checkout", "staging")
        cluster.alerts["HighErrorRate"] = "checkout 5xx ratio 0.42 > 0.05"
        return cluster

    def kubectl(self, command: str) -> tuple[bool, str]:
        """Run a kubectl command line against the simulation: (succeeded, output)."""
        words = shlex.split(command)
        if words and words[0] == "kubectl":
            words = words[1:]
        namespace = "default"
        if "-n" in words:
            i = words.index("-n")
            namespace = words[i + 1] if i + 1 < len(words) else namespace
            del words[i : i + 2]
        if not words:
            return False, "error: no command"
        verb, rest = words[0], words[1:]
        if verb == "get" and rest[:1] == ["pods"]:
            return True, self._pods(namespace)
        if verb == "delete":
            return False, (
                'Error from server (Forbidden): pods is forbidden: User "sre-agent" cannot '
                f'delete resource "pods" in namespace "{namespace}"'
            )
        if verb == "get" and rest:
            name = rest[-1].split("/")[-1]
            return True, f"NAME DATA AGE\n{name} 3 40d"
        if verb in ("describe", "logs"):
            name = rest[-1].split("/")[-1] if rest else ""
            deployment = self._find(name)
            if deployment is None:
                return False, f'Error from server (NotFound): "{name}" not found'
            if verb == "logs":
                return True, _log_lines(deployment)
            state = "CrashLoopBackOff" if not deployment.healthy else "Running"
            return (
                True,
                f"Name: {deployment.name}\nNamespace: {deployment.namespace}\nState: {state}",
            )
        if verb == "rollout" and rest[:1] == ["status"]:
            deployment = self._find(rest[-1].split("/")[-1])
            if deployment is None:
                return False, "not found"
            if deployment.rollout_pending > 0:
                done = deployment.replicas - deployment.rollout_pending
                deployment.rollout_pending -= 1
                return True, (
                    f'Waiting for deployment "{deployment.name}" rollout to finish: {max(done, 0)} '
                    f"of {deployment.replicas} updated replicas are available..."
                )
            return True, f'deployment "{deployment.name}" successfully rolled out'
        if verb == "rollout" and rest[:1] == ["restart"]:
            deployment = self._find(rest[-1].split("/")[-1])
            if deployment is None:
                return False, "not found"
            deployment.generation += 1
            deployment.rollout_pending = deployment.replicas
            return True, f"deployment.apps/{deployment.name} restarted"
        if verb == "set" and rest[:1] == ["resources"]:
            deployment = self._find(rest[1].split("/")[-1]) if len(rest) > 1 else None
            if deployment is None:
                return False, "not found"
            deployment.healthy, deployment.fault = True, ""
            deployment.generation += 1
            self.alerts.pop("HighErrorRate", None)
            return True, f"deployment.apps/{deployment.name} resource requirements updated"
        return False, f"error: unknown command {verb!r}"

    def find_deployment(self, name: str) -> str:
        """Every namespace's deployment of that name (more than one leaves the target open)."""
        found = [d for d in self.deployments.values() if d.name == name]
        if not found:
            return f'no resources found named "{name}"'
        listing = ", ".join(f"{d.namespace}/{d.name}" for d in found)
        if len(found) == 1:
            return listing
        return f"{len(found)} matches: {listing}; more than one deployment has this name"

    def get_alerts(self) -> str:
        if not self.alerts:
            return "no alerts firing"
        return "\n".join(f"{name} firing: {text}" for name, text in sorted(self.alerts.items()))

    def _find(self, name: str) -> Deployment | None:
        for deployment in self.deployments.values():
            if name.startswith(deployment.name):
                return deployment
        return None

    def _pods(self, namespace: str) -> str:
        rows = ["NAME READY STATUS RESTARTS AGE"]
        for d in self.deployments.values():
            if d.namespace != namespace:
                continue
            status = "Running" if d.healthy else "CrashLoopBackOff"
            ready = f"{d.replicas}/{d.replicas}" if d.healthy else f"0/{d.replicas}"
            rows.append(f"{d.name}-{d.generation}f7c {ready} {status} 0 12m")
        return "\n".join(rows)


def _log_lines(deployment: Deployment) -> str:
    """A page of container logs: long enough to weigh on the model's context."""
    lines = [
        f'level=info msg="handled request" service={deployment.name} path=/api/cart/{i} '
        f"status=200 latency_ms={20 + i}"
        for i in range(30)
    ]
    if deployment.fault:
        lines.append(f'level=fatal msg="container terminated" reason="{deployment.fault}"')
    return "\n".join(lines)
