"""What a tool call does to the world, and which resources it touches.

A call is decided by what it is, never by a word somewhere in its text:
1. Tools whose meaning is known by name: a scratchpad or planning tool (`think`, Codex's
   `update_plan`) is NEUTRAL (neither reads nor changes); a transfer to a person (`transfer_to_
   human_agents`, `escalate_to_support`) is an ESCALATION; `apply_patch` changes the files its
   patch header names (`*** Update File: path`, `*** Add File:`, `*** Delete File:`).
2. The verb of the tool's name (the words of a snake_case, camelCase, dotted or hyphenated name,
   a leading namespace such as `k8s_` or `crm.` skipped): `book_`, `cancel_`, `send_`, `pay_`,
   `update_`, `delete_` ... change; `get_`, `search_`, `list_`, `find_` ... read. A name whose
   verb runs something (`shell`, `exec_command`, `run_sql`, `kubectl`) is decided by step 3.
3. The command it runs (`command`, `cmd`, `script`, `query`, `sql` arguments): a shell command is
   parsed into the commands that run (shlex; pipelines, `&&`, `;`, `sudo`, `env`, `bash -lc
   '...'` unwrapped; heredoc bodies dropped), each decided by its program (`rm`, `mv`, `tee`,
   `sed -i`, a `>` redirect change; `cat`, `ls`, `grep`, `echo` read) or, for programs with
   subcommands (kubectl, helm, git, terraform, SQL clients), by the patterns below over its argv.
   Text inside a heredoc, an `echo` or a JSON document is never a command.
4. An HTTP `method` argument (POST/PUT/PATCH/DELETE change, GET/HEAD read).
A call matching none of these is `UNKNOWN`, which detectors treat as not mutating.

Targets come from structured fields: argument keys that name a resource (`target_keys`, and any
key ending in a `target_key_suffixes` entry such as `reservation_id`), the paths of a patch and of
the files a command writes, and the `kind/name` references of a command's argv.
"""

from __future__ import annotations

import json
import re
import shlex
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
    r"version|auth\s+can-i)\b",
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
_WRAPPERS = frozenset(
    {"sudo", "env", "time", "nohup", "nice", "ionice", "timeout", "xargs", "command", "exec",
     "stdbuf", "doas"}
)  # fmt: skip
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish"})
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "|&", ";;", "(", ")"})
_REDIRECTS = frozenset({">", ">>", "&>", ">|", "&>>"})
_ENVELOPES = frozenset({"inputs", "input", "kwargs", "arguments", "params", "parameters"})
_QUIET_SINKS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})

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
    # Neither reads nor changes: a scratchpad or a plan.
    NEUTRAL = "neutral"
    # Passes the conversation to a person (a human agent, support, an operator).
    ESCALATION = "escalation"
    UNKNOWN = "unknown"


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
            "command_keys",
            "mutating_programs",
            "read_programs",
            "target_keys",
            "target_key_suffixes",
        ):
            for word in getattr(self, key):
                if not isinstance(word, str) or not word.strip():
                    raise ValueError(f"classification.{key}: {word!r} is not a non-empty word")


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
_NAME_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_PATCH_FILE = re.compile(
    r"^\*\*\* (?:Update|Add|Delete) File:\s*(\S.*?)\s*$|^\*\*\* Move to:\s*(\S.*?)\s*$",
    re.MULTILINE,
)
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def mentioned_targets(text: str) -> frozenset[str]:
    """Resources a message names in prose: `deployment/checkout`, `-n shop`."""
    found = {name.lower() for _, name in _KUBE_REF.findall(text)}
    found.update(name.lower() for name in _KUBE_VERB_TARGET.findall(text))
    found.update(namespace.lower() for namespace in _NAMESPACE_FLAG.findall(text))
    return frozenset(t.rstrip(".-") for t in found if t.rstrip(".-"))


def name_words(tool_name: str) -> list[str]:
    """The lower-cased words of a tool name: `book_reservation`, `sendEmail`,
    `crm.update-ticket` give [book, reservation], [send, email], [crm, update, ticket]."""
    return [w.lower() for w in _NAME_WORD.findall(tool_name)]


class ActionClassifier:
    """Classifies tool calls as mutating, read-only or unknown and extracts their targets."""

    def __init__(self, config: ClassifierConfig | None = None) -> None:
        self.config = config or ClassifierConfig()
        c = self.config
        flags = re.IGNORECASE | re.MULTILINE
        self._mutating = [re.compile(p, flags) for p in c.mutating_patterns]
        self._read = [re.compile(p, flags) for p in c.read_patterns]
        self._mutating_verbs = frozenset(w.lower() for w in c.mutating_verbs)
        self._read_verbs = frozenset(w.lower() for w in c.read_verbs)
        self._runner_verbs = frozenset(w.lower() for w in c.runner_verbs)
        self._neutral = frozenset(w.lower() for w in c.neutral_tools)
        self._transfer_verbs = frozenset(w.lower() for w in c.transfer_verbs)
        self._person_words = frozenset(w.lower() for w in c.person_words)
        self._command_keys = frozenset(k.lower() for k in c.command_keys)
        self._mutating_programs = frozenset(p.lower() for p in c.mutating_programs)
        self._read_programs = frozenset(p.lower() for p in c.read_programs)
        self._target_keys = frozenset(k.lower() for k in c.target_keys)
        self._target_suffixes = tuple(k.lower() for k in c.target_key_suffixes)
        self._volatile_keys = frozenset(k.lower() for k in c.volatile_argument_keys)
        self._volatile_result = [re.compile(p) for p in c.volatile_result_patterns]
        # The same calls and results recur within and across runs; several detectors ask.
        self.classify = lru_cache(maxsize=4096)(self._classify)
        self.canonical_call = lru_cache(maxsize=4096)(self._canonical_call)
        self.result_fingerprint = lru_cache(maxsize=4096)(self._result_fingerprint)
        self.identifiers = lru_cache(maxsize=4096)(self._identifiers)
        self.run_commands = lru_cache(maxsize=4096)(self._run_commands)

    def _run_commands(self, tool_name: str, arguments: str) -> tuple[str, ...]:
        """The commands a call runs (argv joined by spaces), leaving out programs that only
        print or read text (`echo`, `cat`, `grep`): `python -m pytest -q`, `git status`."""
        parsed = _parse_json(arguments)
        command = _command_value(parsed, self._command_keys) if parsed is not None else None
        if command is None and parsed is None and self._runner_name(tool_name):
            command = arguments
        if isinstance(command, list):
            commands = _unwrap_argv([str(a) for a in command if isinstance(a, str | int | float)])
        elif isinstance(command, str):
            commands = split_commands(command)
        else:
            return ()
        return tuple(
            " ".join(argv)
            for argv in commands
            if argv and argv[0].rsplit("/", 1)[-1].lower() not in self._read_programs
        )

    def _runner_name(self, tool_name: str) -> bool:
        return any(word in self._runner_verbs for word in name_words(tool_name))

    def _identifiers(self, arguments: str) -> frozenset[str]:
        """The record ids a call's arguments give, at any depth (`reservation_id`, a nested
        `payment_methods[].payment_id`, `ticket_ids`): keys `id` or ending in a
        `target_key_suffixes` entry; lower-cased."""
        found: set[str] = set()

        def walk(value: object, depth: int) -> None:
            if depth > 4:
                return
            if isinstance(value, dict):
                for key, item in value.items():
                    lowered = str(key).lower()
                    if lowered == "id" or lowered.endswith(self._target_suffixes):
                        for one in item if isinstance(item, list) else [item]:
                            if isinstance(one, str | int) and not isinstance(one, bool):
                                text = str(one).strip().lower()
                                if text and len(text) <= 256:
                                    found.add(text)
                    else:
                        walk(item, depth + 1)
            elif isinstance(value, list):
                for item in value:
                    walk(item, depth + 1)

        walk(_parse_json(arguments), 0)
        return frozenset(found)

    def is_escalation(self, name: str) -> bool:
        """A tool (or hand-off target) that passes the conversation to a person."""
        words = name_words(name)
        return (
            bool(words)
            and words[0] in self._transfer_verbs
            and bool(self._person_words.intersection(words))
        )

    def _classify(self, tool_name: str, arguments: str) -> Action:
        parsed = _parse_json(arguments)
        targets = self._targets(parsed, arguments)
        if not tool_name:
            # Not a call but a message (a hand-off's brief): it names its targets only in
            # prose, as `kind/name` references and `kubectl <verb> <kind> <name>`.
            return Action(ActionKind.UNKNOWN, targets | mentioned_targets(arguments))
        lowered = tool_name.strip().lower()
        words = name_words(tool_name)
        if lowered in self._neutral or "_".join(words) in self._neutral:
            return Action(ActionKind.NEUTRAL, targets)
        if self.is_escalation(tool_name):
            return Action(ActionKind.ESCALATION, targets)
        if lowered == "apply_patch" or (not words and _PATCH_FILE.search(arguments)):
            patch = _command_value(parsed, ("input", "patch")) if parsed is not None else None
            paths = _patch_paths(patch if isinstance(patch, str) else arguments)
            return Action(ActionKind.MUTATING, targets | paths)
        # The first verb of the name decides; a runner (`shell`, `kubectl_exec`) defers to
        # the command it is given, and without one to the next verb (`kubectl_get`).
        runner = ""
        name_kind = ActionKind.UNKNOWN
        for word in words:
            if word in self._runner_verbs:
                runner = runner or word
                continue
            if word in self._mutating_verbs:
                name_kind = ActionKind.MUTATING
                break
            if word in self._read_verbs:
                name_kind = ActionKind.READ
                break
        if name_kind is not ActionKind.UNKNOWN and not runner:
            return Action(name_kind, targets)
        command = _command_value(parsed, self._command_keys) if parsed is not None else None
        if command is None and parsed is None and runner:
            command = arguments  # a runner given its command line as plain text
        if command is not None:
            kind, command_targets = self._command(command, prefix=runner)
            if kind is not ActionKind.UNKNOWN:
                return Action(kind, targets | command_targets)
        if name_kind is not ActionKind.UNKNOWN:
            return Action(name_kind, targets)
        if isinstance(parsed, dict):
            method = next(
                (v for k, v in parsed.items() if str(k).lower() == "method" and isinstance(v, str)),
                "",
            ).upper()
            if method in ("POST", "PUT", "PATCH", "DELETE"):
                return Action(ActionKind.MUTATING, targets)
            if method in ("GET", "HEAD"):
                return Action(ActionKind.READ, targets)
        return Action(ActionKind.UNKNOWN, targets)

    # --- commands ---------------------------------------------------------------------------

    def _command(self, command: object, prefix: str = "") -> tuple[ActionKind, frozenset[str]]:
        """What a command does: the commands of a shell line (or an argv list), each decided
        by its program; any change makes the whole a change."""
        if isinstance(command, list):
            argv = [str(a) for a in command if isinstance(a, str | int | float)]
            commands = _unwrap_argv(argv)
        elif isinstance(command, str):
            commands = split_commands(command)
        else:
            return ActionKind.UNKNOWN, frozenset()
        kinds: set[ActionKind] = set()
        targets: set[str] = set()
        for argv in commands:
            if (
                prefix
                and argv
                and argv[0].lower() not in (prefix, f"{prefix}.exe")
                and (prefix in ("kubectl", "helm", "terraform", "git"))
            ):
                argv = [prefix, *argv]  # a `kubectl` tool given "get pods"
            kind, found = self._one_command(argv)
            kinds.add(kind)
            targets |= found
        if ActionKind.MUTATING in kinds:
            return ActionKind.MUTATING, frozenset(targets)
        if ActionKind.READ in kinds:
            return ActionKind.READ, frozenset(targets)
        return ActionKind.UNKNOWN, frozenset(targets)

    def _one_command(self, argv: list[str]) -> tuple[ActionKind, set[str]]:
        targets: set[str] = set()
        words: list[str] = []
        writes: list[str] = []
        skip = False
        for position, token in enumerate(argv):
            if skip:
                skip = False
                continue
            if token in _REDIRECTS or (token[:1] == ">" and token not in (">&",)):
                path = (
                    argv[position + 1] if token in _REDIRECTS and position + 1 < len(argv) else ""
                )
                if token not in _REDIRECTS:
                    path = token.lstrip(">|&")
                if path and path not in _QUIET_SINKS and not path.startswith("&"):
                    writes.append(path)
                skip = token in _REDIRECTS
                continue
            if token in ("<", "<<", "<<<", "2>&1", ">&2", "1>&2"):
                skip = token != "2>&1" and token != ">&2" and token != "1>&2"
                continue
            if token[:1].isdigit() and token[1:2] == ">":
                path = token[2:].lstrip(">")
                if path and path not in _QUIET_SINKS and not path.startswith("&"):
                    writes.append(path)
                elif not path:
                    skip = True
                continue
            words.append(token)
        targets.update(_path_target(p) for p in writes)
        if not words:
            return (ActionKind.MUTATING if writes else ActionKind.UNKNOWN), targets
        program = words[0].rsplit("/", 1)[-1].lower()
        line = " ".join(words)
        for _, name in _KUBE_REF.findall(line) if program in ("kubectl", "helm") else ():
            targets.add(name.lower())
        for name in _KUBE_VERB_TARGET.findall(line):
            targets.add(name.lower())
        for namespace in _NAMESPACE_FLAG.findall(line) if program == "kubectl" else ():
            targets.add(namespace.lower())
        args = [w for w in words[1:] if not w.startswith("-")]
        if writes:
            return ActionKind.MUTATING, targets
        if program in self._mutating_programs:
            targets.update(_path_target(a) for a in args if a)
            return ActionKind.MUTATING, targets
        if program in ("sed", "perl") and any(
            w == "-i" or w.startswith(("-i", "--in-place")) for w in words[1:]
        ):
            targets.update(_path_target(a) for a in args[1:] if a)
            return ActionKind.MUTATING, targets
        if program == "find" and any(w in ("-delete", "-exec", "-execdir") for w in words[1:]):
            rest = words[
                words.index(next(w for w in words if w in ("-delete", "-exec", "-execdir"))) :
            ]
            if "-delete" in rest or any(w in self._mutating_programs for w in rest[1:2]):
                return ActionKind.MUTATING, targets
        if program in self._read_programs:
            # The files it reads (`cat src/app.py`, `sed -n 1,9p a.py`): path-like arguments.
            targets.update(_path_target(a) for a in args if "/" in a or "." in a.lstrip("."))
            return ActionKind.READ, targets
        if any(p.search(line) for p in self._mutating):
            return ActionKind.MUTATING, targets
        if any(p.search(line) for p in self._read):
            return ActionKind.READ, targets
        return ActionKind.UNKNOWN, targets

    # --- targets ----------------------------------------------------------------------------

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
                lowered = str(key).lower()
                if (
                    lowered in self._target_keys
                    or lowered == "id"
                    or lowered.endswith(self._target_suffixes)
                ):
                    for item in value if isinstance(value, list) else [value]:
                        if isinstance(item, str | int) and not isinstance(item, bool):
                            name = str(item).strip().lower()
                            if name and len(name) <= 256:
                                targets.add(name.rsplit("/", 1)[-1] if "/" in name else name)
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


def _strip_heredocs(script: str) -> str:
    """The script without heredoc bodies: `cat <<EOF ... EOF` keeps `cat <<EOF`."""
    lines = script.split("\n")
    out: list[str] = []
    ending: list[str] = []
    for line in lines:
        if ending:
            if line.strip() == ending[0]:
                ending.pop(0)
            continue
        out.append(line)
        ending.extend(m.group(2) for m in _HEREDOC.finditer(line))
    return "\n".join(out)


def _unquoted_newlines_to_separators(script: str) -> str:
    out: list[str] = []
    quote = ""
    escaped = False
    for char in script:
        if escaped:
            escaped = False
            if char == "\n":
                out.pop()  # a line continuation
                continue
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            if char == quote:
                quote = ""
        elif char in ("'", '"'):
            quote = char
        elif char == "\n":
            out.append(" ; ")
            continue
        out.append(char)
    return "".join(out)


def split_commands(script: str) -> list[list[str]]:
    """The commands a shell line runs, as argv lists: separated by `;`, `&&`, `||`, `|`, `&`
    and newlines, heredoc bodies dropped, `sudo`/`env`/`bash -lc '...'` unwrapped."""
    text = _unquoted_newlines_to_separators(_strip_heredocs(script))
    lexer = shlex.shlex(text, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        tokens = list(lexer)
    except ValueError:
        tokens = text.split()  # unbalanced quotes: words as they stand
    commands: list[list[str]] = []
    current: list[str] = []
    for token in tokens:
        if token in _SEPARATORS:
            if current:
                commands.extend(_unwrap_argv(current))
            current = []
        else:
            current.append(token)
    if current:
        commands.extend(_unwrap_argv(current))
    return commands


def _unwrap_argv(argv: list[str], depth: int = 0) -> list[list[str]]:
    """The command an argv runs: leading `VAR=value`, wrappers (`sudo -u x`, `env`, `timeout
    5`) and shells given a script (`bash -lc '...'`) removed."""
    words = list(argv)
    while words:
        head = words[0].rsplit("/", 1)[-1]
        if "=" in words[0] and not words[0].startswith("-") and re.match(r"^\w+=", words[0]):
            words.pop(0)
        elif head in _WRAPPERS:
            words.pop(0)
            while words and (words[0].startswith("-") or re.match(r"^\w+=", words[0])):
                flag = words.pop(0)
                if flag in ("-u", "-g", "-n", "-s", "--user") and words:
                    words.pop(0)
            if head == "timeout" and words and re.match(r"^\d", words[0]):
                words.pop(0)
        elif head in _SHELLS and depth < 4:
            for position, word in enumerate(words[1:], start=1):
                if word.startswith("-") and "c" in word.lstrip("-") and position + 1 < len(words):
                    return split_commands(words[position + 1])
            return [words]
        else:
            return [words]
    return []
