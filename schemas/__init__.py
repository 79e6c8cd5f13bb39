"""ClickHouse DDL for the store, applied in order, and the conventions the collector reads.

Each `sql/NNN_*.sql` file is one migration: statements separated by `;` at the end of a line,
with `{db}` standing for the database. They are idempotent (`IF NOT EXISTS`), and applied
versions are recorded in `mast_schema_versions`. A file, once released, is never edited: a change
to the schema is a new file (`ALTER TABLE ... ADD COLUMN IF NOT EXISTS`, a new view), so a store
at any earlier version moves forward by applying the files it has not seen.

The same files describe a single node and a cluster. `render` turns each statement into the
statements for a `Layout`:

- single node (`cluster=""`): the statement as written, `{db}` replaced;
- cluster: every table `T` becomes a local table `T_local` created `ON CLUSTER` with the
  `Replicated` variant of its engine (replication path `/clickhouse/tables/{shard}/DB/T_local`,
  replica `{replica}`: the server's macros), plus a `Distributed` table `T` over the local tables,
  sharded by `cityHash64(TraceId)` where the table has a trace id (so one run's rows, and all
  versions of its signature, live on one shard), else `rand()`. Materialized views are created on
  every node and read and write the local tables; `ALTER`s of columns apply to the local and the
  Distributed table, other `ALTER`s to the local one; `INSERT ... SELECT` runs once, through the
  Distributed tables.

Only these statement forms are used, so the rendering is a handful of exact patterns; a statement
of any other form is refused (`SchemaSourceError`), never passed through half-translated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from mast_otel.processors.conventions import FATAL_PRIOR_CODES

LOCAL_SUFFIX = "_local"
SCHEMA_VERSIONS_TABLE = "mast_schema_versions"

# Deduplication window (in inserted blocks) of single-node MergeTree tables; see 005.
DEDUP_WINDOW = 1000


class SchemaSourceError(ValueError):
    """A DDL file holds a statement the renderer does not know how to place on a cluster."""


@dataclass(frozen=True, slots=True)
class Layout:
    """Where the schema goes: a database, on one node ("") or on a named cluster."""

    database: str = "otel"
    cluster: str = ""


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


# The schema-version table is created before any migration (it says which are applied), from
# the same kind of source, so a cluster gets it replicated and distributed like the rest.
_BOOTSTRAP = (
    "CREATE TABLE IF NOT EXISTS {db}.mast_schema_versions "
    "(Version UInt32, Name String, AppliedAt DateTime DEFAULT now()) "
    "ENGINE = ReplacingMergeTree() ORDER BY Version",
)

# Which column each table's TTL counts from, by the group `storage.ttl_days` names.
TTL_TABLES: dict[str, tuple[tuple[str, str], ...]] = {
    "spans": (("otel_traces", "toDateTime(Timestamp)"), ("otel_traces_trace_id_ts", "Start")),
    "logs": (("otel_logs", "TimestampTime"),),
    "findings": (("mast_findings", "toDateTime(Timestamp)"),),
    "signatures": (("mast_signatures", "toDateTime(Start)"),),
    "rollups": (("mast_findings_per_minute", "Minute"), ("mast_runs_per_minute", "Minute")),
}


def _source_values() -> dict[str, str]:
    """Values other than the database that the DDL files refer to, from their one home."""
    quoted = ", ".join(f"'{code}'" for code in FATAL_PRIOR_CODES)
    return {"{fatal_modes}": f"({quoted})", "{fatal_modes_array}": f"[{quoted}]"}


@dataclass(frozen=True, slots=True)
class _SourceMigration:
    version: int
    name: str
    statements: tuple[str, ...]


@cache
def _source() -> tuple[_SourceMigration, ...]:
    found = []
    for entry in resources.files("mast_otel.schemas").joinpath("sql").iterdir():
        if not entry.name.endswith(".sql"):
            continue
        version = int(entry.name.split("_", 1)[0])
        text = entry.read_text(encoding="utf-8")
        for key, value in _source_values().items():
            text = text.replace(key, value)
        statements = tuple(
            _strip_comments(s)
            for s in re.split(r";[ \t]*\n", text + "\n")
            if s.strip() and not _only_comments(s)
        )
        found.append(_SourceMigration(version, entry.name.removesuffix(".sql"), statements))
    return tuple(sorted(found, key=lambda m: m.version))


def _only_comments(statement: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in statement.splitlines())


def _strip_comments(statement: str) -> str:
    lines = [line for line in statement.splitlines() if not line.strip().startswith("--")]
    return "\n".join(lines).strip().rstrip(";").strip()


@cache
def sharded_tables() -> frozenset[str]:
    """Every table the schema creates (these get a local and a Distributed table on a
    cluster); views are not among them."""
    names = set()
    for statement in (*_BOOTSTRAP, *(s for m in _source() for s in m.statements)):
        match = _CREATE_TABLE.match(statement)
        if match:
            names.add(match["name"])
    return frozenset(names)


def latest_version() -> int:
    return max(m.version for m in _source())


def migrations(database: str, cluster: str = "") -> list[Migration]:
    """Every migration, oldest first, rendered for `database` on one node or on `cluster`."""
    layout = Layout(database, cluster)
    return [
        Migration(
            m.version,
            m.name,
            tuple(out for statement in m.statements for out in render(statement, layout)),
        )
        for m in _source()
    ]


def bootstrap_statements(layout: Layout) -> list[str]:
    """The database and the schema-version table, before any migration."""
    on_cluster = _on_cluster(layout)
    out = [f"CREATE DATABASE IF NOT EXISTS {layout.database}{on_cluster}"]
    for statement in _BOOTSTRAP:
        out.extend(render(statement, layout))
    return out


def record_version_statement(layout: Layout, migration: Migration) -> str:
    settings = " SETTINGS distributed_foreground_insert = 1" if layout.cluster else ""
    name = migration.name.replace("'", "")
    return (
        f"INSERT INTO {layout.database}.{SCHEMA_VERSIONS_TABLE} (Version, Name){settings} "
        f"VALUES ({int(migration.version)}, '{name}')"
    )


def ttl_statement(layout: Layout, table: str, column: str, days: int) -> list[str]:
    """The statements setting `table`'s TTL to `days` days after `column`."""
    return render(f"ALTER TABLE {{db}}.{table} MODIFY TTL {ttl_expression(column, days)}", layout)


def ttl_expression(column: str, days: int) -> str:
    """As ClickHouse itself spells it in `system.tables.engine_full`."""
    return f"{column} + toIntervalDay({int(days)})"


def storage_table(layout: Layout, table: str) -> str:
    """The name of the table that holds `table`'s rows on this node (its local table on a
    cluster): where TTLs and settings live."""
    return f"{table}{LOCAL_SUFFIX}" if layout.cluster and table in sharded_tables() else table


# --- rendering ---------------------------------------------------------------------------------

_CREATE_TABLE = re.compile(
    r"^CREATE TABLE IF NOT EXISTS \{db\}\.(?P<name>\w+)\s*(?P<rest>\(.*)$", re.S
)
_CREATE_MV = re.compile(
    r"^CREATE MATERIALIZED VIEW IF NOT EXISTS \{db\}\.(?P<name>\w+)\s+(?P<rest>TO .*)$", re.S
)
_ALTER = re.compile(r"^ALTER TABLE \{db\}\.(?P<name>\w+)\s+(?P<rest>.*)$", re.S)
_INSERT = re.compile(r"^INSERT INTO \{db\}\.(?P<name>\w+)\s+(?P<rest>.*)$", re.S)
_ENGINE = re.compile(r"ENGINE = (?P<family>\w*)MergeTree(?:\((?P<args>[^)]*)\))?")
_COLUMN_ACTION = re.compile(r"^(ADD|DROP|MODIFY|RENAME|COMMENT|CLEAR) COLUMN\b")
_TABLE_REF = re.compile(r"\{db\}\.(\w+)")
_INSERT_SETTINGS = re.compile(r"\s+SETTINGS\s+")


def _on_cluster(layout: Layout) -> str:
    return f" ON CLUSTER '{layout.cluster}'" if layout.cluster else ""


def render(statement: str, layout: Layout) -> list[str]:
    """The statements that carry out one source statement on `layout`."""
    statement = statement.strip()
    kind = _kind(statement)
    db = layout.database
    if not layout.cluster:
        return [statement.replace("{db}", db)]
    on = _on_cluster(layout)
    if kind == "table":
        match = _CREATE_TABLE.match(statement)
        assert match is not None
        name, rest = match["name"], match["rest"]
        local = f"{name}{LOCAL_SUFFIX}"
        engine = _ENGINE.search(rest)
        if engine is None:
            raise SchemaSourceError(f"{name}: only *MergeTree engines can be replicated")
        path = f"'/clickhouse/tables/{{shard}}/{db}/{local}', '{{replica}}'"
        args = f"{path}, {engine['args']}" if engine["args"] else path
        replicated = f"ENGINE = Replicated{engine['family']}MergeTree({args})"
        rest = rest[: engine.start()] + replicated + rest[engine.end() :]
        shard_key = "cityHash64(TraceId)" if re.search(r"\bTraceId\s", rest) else "rand()"
        return [
            f"CREATE TABLE IF NOT EXISTS {db}.{local}{on} {_localize(rest, db)}",
            f"CREATE TABLE IF NOT EXISTS {db}.{name}{on} AS {db}.{local} "
            f"ENGINE = Distributed('{layout.cluster}', '{db}', '{local}', {shard_key})",
        ]
    if kind == "view":
        match = _CREATE_MV.match(statement)
        assert match is not None
        return [
            f"CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.{match['name']}{on} "
            f"{_localize(match['rest'], db)}"
        ]
    if kind == "alter":
        match = _ALTER.match(statement)
        assert match is not None
        name, rest = match["name"], match["rest"]
        if name not in sharded_tables():
            raise SchemaSourceError(f"ALTER of {name}: not a table this schema creates")
        out = [f"ALTER TABLE {db}.{name}{LOCAL_SUFFIX}{on} {rest}"]
        if _COLUMN_ACTION.match(rest):
            # A Distributed table's columns must follow its local tables'.
            out.append(f"ALTER TABLE {db}.{name}{on} {rest}")
        return out
    # insert: once, through the Distributed tables, waiting until the shards have the rows.
    return [
        _INSERT_SETTINGS.sub(
            "\nSETTINGS distributed_foreground_insert = 1, ", statement.replace("{db}", db), 1
        )
    ]


def _kind(statement: str) -> str:
    if _CREATE_TABLE.match(statement):
        return "table"
    if _CREATE_MV.match(statement):
        return "view"
    if _ALTER.match(statement):
        return "alter"
    if _INSERT.match(statement) and _INSERT_SETTINGS.search(statement):
        return "insert"
    raise SchemaSourceError(
        "a DDL statement must be CREATE TABLE IF NOT EXISTS {db}.T, CREATE MATERIALIZED VIEW IF "
        "NOT EXISTS {db}.V TO ..., ALTER TABLE {db}.T ... or INSERT INTO {db}.T SETTINGS "
        f"insert_deduplication_token = '...' SELECT ...; got: {statement[:120]}"
    )


def _localize(text: str, db: str) -> str:
    """Point references to schema tables at their local tables (views read and write locally)."""

    def local(match: re.Match[str]) -> str:
        name = match[1]
        suffix = LOCAL_SUFFIX if name in sharded_tables() else ""
        return f"{db}.{name}{suffix}"

    return _TABLE_REF.sub(local, text)
