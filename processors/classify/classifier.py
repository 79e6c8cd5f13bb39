"""The classifier: what a tool call does (mutating, read, neutral, escalation, unknown) and
which resources it touches, decided by the tool's name, the command it runs or its HTTP method."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from mast_otel.processors.classify.arguments import (
    _KUBE_REF,
    _PATCH_FILE,
    _command_value,
    _manifests,
    _parse_json,
    _patch_paths,
    _path_target,
    mentioned_targets,
    name_words,
)
from mast_otel.processors.classify.resources import (
    argument_targets,
    command_targets,
    manifest_targets,
)
from mast_otel.processors.classify.shell import _unwrap_argv, split_commands
from mast_otel.processors.classify.targets import Target, prose_targets
from mast_otel.processors.classify.vocabulary import ClassifierConfig

_REDIRECTS = frozenset({">", ">>", "&>", ">|", "&>>"})
_QUIET_SINKS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})


class ActionKind(StrEnum):
    MUTATING = "mutating"
    READ = "read"
    # Neither reads nor changes: a scratchpad or a plan.
    NEUTRAL = "neutral"
    # Passes the conversation to a person (a human agent, support, an operator).
    ESCALATION = "escalation"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Action:
    kind: ActionKind
    # The names it acts on (resource names, namespaces, ids, paths), lower-cased.
    targets: frozenset[str]
    # The same resources structured (kind, name, namespace): what verification compares.
    refs: frozenset[Target] = frozenset()


def _action_word(parsed: object, keys: frozenset[str]) -> str:
    """The sub-command an action key of the arguments gives, when it is one word."""
    if not isinstance(parsed, dict):
        return ""
    for key, value in parsed.items():
        if str(key).lower() in keys and isinstance(value, str):
            word = value.strip().lower()
            if word and len(word) <= 40 and re.fullmatch(r"[a-z][a-z_-]*", word):
                return word
    return ""


def _split_redirects(argv: list[str]) -> tuple[list[str], list[str]]:
    """A command's words without its redirections, and the files it redirects output to."""
    words: list[str] = []
    writes: list[str] = []
    skip = False
    for position, token in enumerate(argv):
        if skip:
            skip = False
            continue
        if token in _REDIRECTS or (token[:1] == ">" and token not in (">&",)):
            path = argv[position + 1] if token in _REDIRECTS and position + 1 < len(argv) else ""
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
    return words, writes


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
        self._action_keys = frozenset(k.lower() for k in c.action_keys)
        self._mutating_programs = frozenset(p.lower() for p in c.mutating_programs)
        self._read_programs = frozenset(p.lower() for p in c.read_programs)
        self._target_keys = frozenset(k.lower() for k in c.target_keys)
        self._target_suffixes = tuple(k.lower() for k in c.target_key_suffixes)
        self._namespace_keys = tuple(k.lower() for k in c.namespace_keys)
        self._kind_keys = tuple(k.lower() for k in c.kind_keys)
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
        targets, refs = self._targets(parsed, arguments, tool_name)

        def action(
            kind: ActionKind,
            more: frozenset[str] = frozenset(),
            also: frozenset[Target] = frozenset(),
        ) -> Action:
            return Action(kind, targets | more, refs | also)

        if not tool_name:
            # Not a call but a message (a hand-off's brief): it names its targets only in
            # prose, as `kind/name` references and `kubectl <verb> <kind> <name>`.
            prose = frozenset(prose_targets(arguments))
            return action(ActionKind.UNKNOWN, mentioned_targets(arguments), prose)
        lowered = tool_name.strip().lower()
        words = name_words(tool_name)
        if lowered in self._neutral or "_".join(words) in self._neutral:
            return action(ActionKind.NEUTRAL)
        if self.is_escalation(tool_name):
            return action(ActionKind.ESCALATION)
        if lowered == "apply_patch" or (not words and _PATCH_FILE.search(arguments)):
            patch = _command_value(parsed, ("input", "patch")) if parsed is not None else None
            paths = _patch_paths(patch if isinstance(patch, str) else arguments)
            return action(ActionKind.MUTATING, paths, frozenset(Target("", p) for p in paths))
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
            return action(name_kind)
        command = _command_value(parsed, self._command_keys) if parsed is not None else None
        if command is None and parsed is None and runner:
            command = arguments  # a runner given its command line as plain text
        sub = _action_word(parsed, self._action_keys) if command is None else ""
        if sub and runner:
            # `kubectl_rollout` given `{"action": "history"}` runs `kubectl rollout history`.
            command = " ".join([*(w for w in words if w != runner), sub])
        elif sub and name_kind is ActionKind.UNKNOWN:
            verb = sub.replace("-", "_").split("_")[0]
            if verb in self._mutating_verbs:
                return action(ActionKind.MUTATING)
            if verb in self._read_verbs:
                return action(ActionKind.READ)
        if command is not None:
            kind, command_targets, command_refs = self._command(command, prefix=runner)
            if kind is not ActionKind.UNKNOWN:
                return action(kind, command_targets, command_refs)
        if name_kind is not ActionKind.UNKNOWN:
            return action(name_kind)
        if isinstance(parsed, dict):
            method = next(
                (v for k, v in parsed.items() if str(k).lower() == "method" and isinstance(v, str)),
                "",
            ).upper()
            if method in ("POST", "PUT", "PATCH", "DELETE"):
                return action(ActionKind.MUTATING)
            if method in ("GET", "HEAD"):
                return action(ActionKind.READ)
        return action(ActionKind.UNKNOWN)

    # --- commands ---------------------------------------------------------------------------

    def _command(
        self, command: object, prefix: str = ""
    ) -> tuple[ActionKind, frozenset[str], frozenset[Target]]:
        """What a command does: the commands of a shell line (or an argv list), each decided
        by its program; any change makes the whole a change."""
        if isinstance(command, list):
            argv = [str(a) for a in command if isinstance(a, str | int | float)]
            commands = _unwrap_argv(argv)
        elif isinstance(command, str):
            commands = split_commands(command)
        else:
            return ActionKind.UNKNOWN, frozenset(), frozenset()
        kinds: set[ActionKind] = set()
        targets: set[str] = set()
        refs: set[Target] = set()
        for argv in commands:
            if (
                prefix
                and argv
                and argv[0].lower() not in (prefix, f"{prefix}.exe")
                and (prefix in ("kubectl", "helm", "terraform", "git"))
            ):
                argv = [prefix, *argv]  # a `kubectl` tool given "get pods"
            words, writes = _split_redirects(argv)
            structured = command_targets(words)
            kind, found = self._one_command(words, writes, structured)
            kinds.add(kind)
            targets |= found
            named = {w for r in structured for w in r.words()}
            refs |= structured | {Target("", t) for t in found if t not in named}
        kind = next(
            (k for k in (ActionKind.MUTATING, ActionKind.READ) if k in kinds), ActionKind.UNKNOWN
        )
        return kind, frozenset(targets | {w for r in refs for w in r.words()}), frozenset(refs)

    def _one_command(
        self, words: list[str], writes: list[str], structured: set[Target]
    ) -> tuple[ActionKind, set[str]]:
        """What one command does (its argv without redirects, the files it redirects to) and
        the names it gives; `structured` are the resources `command_targets` read in it."""
        targets: set[str] = {w for r in structured for w in r.words()}
        targets.update(_path_target(p) for p in writes)
        if not words:
            return (ActionKind.MUTATING if writes else ActionKind.UNKNOWN), targets
        program = words[0].rsplit("/", 1)[-1].lower()
        line = " ".join(words)
        for _, name in _KUBE_REF.findall(line) if program == "helm" else ():
            targets.add(name.lower())
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

    def _targets(
        self, parsed: object, arguments: str, tool_name: str = ""
    ) -> tuple[frozenset[str], frozenset[Target]]:
        targets: set[str] = set()
        refs: set[Target] = set()
        # A Kubernetes manifest names its target in `kind` / `metadata`; its `apiVersion`
        # (`apps/v1`) looks like a `kind/name` reference and names nothing.
        manifests = _manifests(parsed if parsed is not None else arguments)
        for document in manifests:
            flat, found_refs = manifest_targets(document)
            targets |= flat
            refs |= found_refs
        if isinstance(parsed, dict) and not (manifests and manifests[0] is parsed):
            flat, found_refs = argument_targets(
                parsed,
                tool_name,
                self._target_keys,
                self._target_suffixes,
                self._namespace_keys,
                self._kind_keys,
            )
            targets |= flat
            refs |= found_refs
        # A name at the end of a sentence keeps its full stop out ("deployment/checkout.").
        return frozenset(t.rstrip(".-") for t in targets if t.rstrip(".-")), frozenset(
            r for r in refs if r.name or r.kind or r.namespace
        )

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
