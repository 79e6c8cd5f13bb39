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
the files a command writes, and the `kind/name` references of a command's argv. Each call
gives them twice: as flat names (`Action.targets`) and as `Target`s, a kind, a name and a
namespace (`Action.refs`; targets.py, resources.py), parsed from what people write
(`deployment/payments-api -n payments`, `pods -n payments`, a kubectl command line, a
manifest, a URL, the tables of SQL); `covers` (coverage.py) says whether a read looks at what
a change changed.
"""

from mast_otel.processors.classify.arguments import mentioned_targets, name_words
from mast_otel.processors.classify.classifier import Action, ActionClassifier, ActionKind
from mast_otel.processors.classify.coverage import checks, covers
from mast_otel.processors.classify.resources import sql_tables
from mast_otel.processors.classify.shell import split_commands
from mast_otel.processors.classify.targets import (
    Target,
    kube_kind,
    kubectl_targets,
    parse_resource,
    parse_url,
    prose_targets,
)
from mast_otel.processors.classify.vocabulary import (
    DEFAULT_COMMAND_KEYS,
    DEFAULT_MUTATING_PATTERNS,
    DEFAULT_MUTATING_PROGRAMS,
    DEFAULT_MUTATING_VERBS,
    DEFAULT_NEUTRAL_TOOLS,
    DEFAULT_PERSON_WORDS,
    DEFAULT_READ_PATTERNS,
    DEFAULT_READ_PROGRAMS,
    DEFAULT_READ_VERBS,
    DEFAULT_RUNNER_VERBS,
    DEFAULT_TARGET_KEYS,
    DEFAULT_TRANSFER_VERBS,
    ClassifierConfig,
)

__all__ = [
    "DEFAULT_COMMAND_KEYS",
    "DEFAULT_MUTATING_PATTERNS",
    "DEFAULT_MUTATING_PROGRAMS",
    "DEFAULT_MUTATING_VERBS",
    "DEFAULT_NEUTRAL_TOOLS",
    "DEFAULT_PERSON_WORDS",
    "DEFAULT_READ_PATTERNS",
    "DEFAULT_READ_PROGRAMS",
    "DEFAULT_READ_VERBS",
    "DEFAULT_RUNNER_VERBS",
    "DEFAULT_TARGET_KEYS",
    "DEFAULT_TRANSFER_VERBS",
    "Action",
    "ActionClassifier",
    "ActionKind",
    "ClassifierConfig",
    "Target",
    "checks",
    "covers",
    "kube_kind",
    "kubectl_targets",
    "mentioned_targets",
    "name_words",
    "parse_resource",
    "parse_url",
    "prose_targets",
    "split_commands",
    "sql_tables",
]
