"""The classifier's vocabularies and its configuration: which verbs of tool names, which
programs and which command patterns change the system or only read it, which argument keys name
the resource a call acts on, and what varies between otherwise identical calls and results."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

DEFAULT_MUTATING_PATTERNS: tuple[str, ...] = (
    r"\bkubectl\s+(?:-\S+\s+\S+\s+)*(?:apply|patch|delete|scale|edit|replace|create|set|label|"
    r"annotate|cordon|uncordon|drain|taint|autoscale|expose)\b",
    r"\bkubectl\s+(?:-\S+\s+\S+\s+)*rollout\s+(?:restart|undo|pause|resume)\b",
    r"\bhelm\s+(?:install|upgrade|rollback|uninstall|delete)\b",
    r"\bterraform\s+(?:apply|destroy|import)\b",
    r"\b(?:INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|DROP\s+(?:TABLE|DATABASE|INDEX)|"
    r"ALTER\s+TABLE|TRUNCATE)\b",
    r"\bsystemctl\s+(?:restart|stop|start|reload|disable|enable)\b",
    r"^git\s+(?:-\S+\s+)*(?:commit|push|apply|am|checkout|switch|reset|rebase|merge|add|rm|mv|"
    r"stash|tag|cherry-pick|revert|clean|restore|init|clone|pull)\b",
    r"^(?:pip3?|npm|pnpm|yarn|apt(?:-get)?|brew|cargo|gem|poetry|uv)\s+(?:-\S+\s+)*"
    r"(?:install|uninstall|add|remove|upgrade|publish)\b",
    r"^docker\s+(?:rm|rmi|run|stop|kill|push|build|compose\s+(?:up|down))\b",
    r"^curl\b.*\s(?:-X\s*|--request[=\s]+)(?:POST|PUT|PATCH|DELETE)\b",
    r"^curl\b.*\s(?:-d|--data(?:-raw|-binary)?|-F|--form|-T|--upload-file)\b",
)

DEFAULT_READ_PATTERNS: tuple[str, ...] = (
    r"\bkubectl\s+(?:-\S+\s+\S+\s+)*(?:get|describe|logs|top|explain|events|api-resources|"
    r"version|wait|auth\s+can-i)\b",
    r"\bkubectl\s+(?:-\S+\s+\S+\s+)*rollout\s+(?:status|history)\b",
    r"\bhelm\s+(?:list|status|get|history)\b",
    r"\bterraform\s+(?:plan|show|state\s+list)\b",
    r"\b(?:SELECT\s.+?\sFROM|SHOW\s+\w+|DESCRIBE\s+\w+|EXPLAIN\s+\w+)\b",
    r"^git\s+(?:-\S+\s+)*(?:status|diff|log|show|branch|grep|ls-files|rev-parse|blame|remote|"
    r"fetch|describe|config\s+--get)\b",
    r"^(?:curl|wget|http)\b",
    r"^python[\d.]*\s+-m\s+(?:pytest|unittest|mypy|ruff|pyflakes|compileall|py_compile)\b",
    r"^(?:pytest|tox|go\s+(?:test|vet|build)|cargo\s+(?:test|check|build|clippy)|npm\s+(?:test|"
    r"run\s+(?:test|lint|build))|make\s+(?:test|check|lint)|ruff|mypy|eslint|tsc)\b",
)

# Verbs of tool names (the first verb of the name decides).
DEFAULT_MUTATING_VERBS: tuple[str, ...] = (
    "add", "apply", "approve", "assign", "book", "cancel", "charge", "close", "cordon",
    "create", "delete", "deploy", "disable", "drain", "edit", "enable", "evict", "exchange",
    "grant", "insert", "issue", "kill", "merge", "modify", "move", "patch", "pay",
    "post", "publish", "purchase", "put", "refund", "reject", "remediate", "remove", "rename",
    "reopen", "replace", "reserve", "forward", "reset", "resolve", "restart", "revoke", "rollback",
    "rollout", "save", "scale", "schedule", "send", "set", "submit", "transfer", "uninstall",
    "install", "unassign", "update", "upgrade", "upload", "upsert", "write", "comment", "reply",
    "mark", "commit", "push", "suspend", "terminate", "stop", "start", "revert",
)  # fmt: skip
DEFAULT_READ_VERBS: tuple[str, ...] = (
    "get", "list", "describe", "read", "fetch", "query", "search", "check", "show", "inspect",
    "watch", "logs", "metric", "metrics", "alert", "alerts", "status", "health", "top",
    "find", "grep", "cat", "view", "lookup", "look", "retrieve", "browse", "count", "verify",
    "validate", "lint", "test", "diff", "preview", "calculate", "compute", "estimate", "load",
    "download", "scan", "explain", "trace", "ping", "probe", "monitor", "summarize",
)  # fmt: skip
# Verbs of tool names that run a command given in the arguments (decided by that command).
DEFAULT_RUNNER_VERBS: tuple[str, ...] = (
    "shell", "exec", "execute", "run", "bash", "sh", "terminal", "command", "cmd", "kubectl",
    "helm", "terraform", "git", "sql", "psql", "local",
)  # fmt: skip
# Tools that neither read nor change anything (a scratchpad, a plan).
DEFAULT_NEUTRAL_TOOLS: tuple[str, ...] = (
    "think", "update_plan", "todo_write", "todowrite", "plan", "scratchpad", "note", "reflect",
)  # fmt: skip
# Words in a transfer tool's name (or hand-off target) that name a person, not an agent.
DEFAULT_PERSON_WORDS: tuple[str, ...] = (
    "human", "humans", "person", "people", "support", "operator", "operators", "representative",
    "staff", "live", "manager", "supervisor", "specialist",
)  # fmt: skip
# Verbs of a tool that passes the conversation on (with a person word: an escalation).
DEFAULT_TRANSFER_VERBS: tuple[str, ...] = (
    "transfer", "escalate", "handoff", "hand", "delegate", "route", "talk",
)  # fmt: skip
# Argument keys holding the sub-command of a tool that does several things
# (`kubectl_rollout` given `{"action": "history"}`, `reservation` given `{"operation": "cancel"}`).
DEFAULT_ACTION_KEYS: tuple[str, ...] = (
    "action", "subcommand", "sub_command", "operation", "op",
)  # fmt: skip
# Argument keys holding a command to run (a shell line, an argv list, SQL).
DEFAULT_COMMAND_KEYS: tuple[str, ...] = (
    "command", "cmd", "commands", "script", "query", "sql", "statement", "argv", "args",
)  # fmt: skip
# Programs that change files or the system whatever their arguments.
DEFAULT_MUTATING_PROGRAMS: tuple[str, ...] = (
    "rm", "rmdir", "mv", "cp", "mkdir", "touch", "chmod", "chown", "ln", "tee", "truncate",
    "dd", "patch", "install", "shred", "unlink", "rsync", "scp", "apply_patch", "kill",
    "pkill", "useradd", "userdel", "crontab", "reboot", "shutdown",
)  # fmt: skip
# Programs that only read (an `echo` prints: its words are not a command).
DEFAULT_READ_PROGRAMS: tuple[str, ...] = (
    "cat", "ls", "head", "tail", "grep", "rg", "egrep", "fgrep", "find", "less", "more", "wc",
    "stat", "file", "tree", "pwd", "echo", "printf", "diff", "du", "df", "ps", "which", "jq",
    "yq", "awk", "sed", "nl", "cut", "sort", "uniq", "tr", "basename", "dirname", "realpath",
    "readlink", "date", "whoami", "id", "uname", "hostname", "env", "printenv", "true", "false",
    "test", "[", "cd", "fd", "bat", "xxd", "od", "hexdump", "md5sum", "sha256sum", "column",
)  # fmt: skip
# Programs that run the rest of their argv as a command (`sudo rm x` is `rm x`).

# Argument keys whose values name the resource a call acts on.
DEFAULT_TARGET_KEYS: tuple[str, ...] = (
    "name",
    "resource",
    "resources",
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

# Argument keys holding a namespace, in order of preference.
DEFAULT_NAMESPACE_KEYS: tuple[str, ...] = ("namespace", "ns", "namespace_name", "k8s_namespace")
# Argument keys holding a kind (`{"kind": "Deployment", "name": "x"}`), in order of preference.
DEFAULT_KIND_KEYS: tuple[str, ...] = (
    "kind", "resource_type", "resourcetype", "resource_kind", "resourcekind", "type",
    "object_type", "objecttype",
)  # fmt: skip


@dataclass
class ClassifierConfig:
    """Which tool calls change the system and which only read it, and what they act on."""

    # Verbs of tool names (`book_reservation`, `sendEmail`, `crm.update_ticket`) that change
    # something; the first verb of the name decides.
    mutating_verbs: list[str] = field(default_factory=lambda: list(DEFAULT_MUTATING_VERBS))
    # Verbs of tool names that only read.
    read_verbs: list[str] = field(default_factory=lambda: list(DEFAULT_READ_VERBS))
    # Verbs of tool names that run the command in their arguments (decided by that command).
    runner_verbs: list[str] = field(default_factory=lambda: list(DEFAULT_RUNNER_VERBS))
    # Tool names that neither read nor change (a scratchpad, a plan).
    neutral_tools: list[str] = field(default_factory=lambda: list(DEFAULT_NEUTRAL_TOOLS))
    # Verbs of a tool that passes the conversation on; with a person word, an escalation.
    transfer_verbs: list[str] = field(default_factory=lambda: list(DEFAULT_TRANSFER_VERBS))
    # Words that name a person rather than an agent (`transfer_to_human_agents`).
    person_words: list[str] = field(default_factory=lambda: list(DEFAULT_PERSON_WORDS))
    # Argument keys holding a tool's sub-command, one word (`{"action": "status"}`): it decides
    # for a runner tool (`kubectl_rollout` given `status` runs `kubectl rollout status`) and
    # for a tool whose name has no verb.
    action_keys: list[str] = field(default_factory=lambda: list(DEFAULT_ACTION_KEYS))
    # Argument keys holding a command to run (a shell line, an argv list, SQL).
    command_keys: list[str] = field(default_factory=lambda: list(DEFAULT_COMMAND_KEYS))
    # Programs that change files or the system whatever their arguments.
    mutating_programs: list[str] = field(default_factory=lambda: list(DEFAULT_MUTATING_PROGRAMS))
    # Programs that only read.
    read_programs: list[str] = field(default_factory=lambda: list(DEFAULT_READ_PROGRAMS))
    # Regular expressions (case-insensitive) over one parsed command (its argv joined by spaces)
    # that changes the system: programs with subcommands (kubectl, helm, git, SQL, curl).
    mutating_patterns: list[str] = field(default_factory=lambda: list(DEFAULT_MUTATING_PATTERNS))
    # Regular expressions over one parsed command that only reads.
    read_patterns: list[str] = field(default_factory=lambda: list(DEFAULT_READ_PATTERNS))
    # Argument keys whose values name the resource a call acts on.
    target_keys: list[str] = field(default_factory=lambda: list(DEFAULT_TARGET_KEYS))
    # Endings of argument keys whose values name the resource (`reservation_id`, `ticket_ids`).
    target_key_suffixes: list[str] = field(default_factory=lambda: ["_id", "_ids", "id"])
    # Argument keys holding the namespace of the resource the other keys name (`{"deployment":
    # "x", "namespace": "y"}`); the first present is read.
    namespace_keys: list[str] = field(default_factory=lambda: list(DEFAULT_NAMESPACE_KEYS))
    # Argument keys holding the kind of the resource the name keys name (`{"kind":
    # "Deployment", "name": "x"}`); any value of `kind`, a Kubernetes kind of the others.
    kind_keys: list[str] = field(default_factory=lambda: list(DEFAULT_KIND_KEYS))
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
        for key in (
            "mutating_verbs",
            "read_verbs",
            "runner_verbs",
            "neutral_tools",
            "transfer_verbs",
            "person_words",
            "action_keys",
            "command_keys",
            "mutating_programs",
            "read_programs",
            "target_keys",
            "target_key_suffixes",
            "namespace_keys",
            "kind_keys",
        ):
            for word in getattr(self, key):
                if not isinstance(word, str) or not word.strip():
                    raise ValueError(f"classification.{key}: {word!r} is not a non-empty word")
