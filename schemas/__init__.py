"""ClickHouse DDL for the store, applied in order, and the conventions the collector reads.

Each `sql/NNN_*.sql` file holds statements separated by `;` lines, with `{db}` standing for the
database. They are idempotent (`IF NOT EXISTS`), and applied versions are recorded in
`mast_schema_versions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


def migrations(database: str) -> list[Migration]:
    """Every migration, oldest first, with `{db}` replaced by `database`."""
    found = []
    for entry in resources.files("schemas").joinpath("sql").iterdir():
        if not entry.name.endswith(".sql"):
            continue
        version = int(entry.name.split("_", 1)[0])
        text = entry.read_text(encoding="utf-8").replace("{db}", database)
        statements = tuple(
            s.strip() for s in text.split(";\n") if s.strip() and not _only_comments(s)
        )
        found.append(Migration(version, entry.name.removesuffix(".sql"), statements))
    return sorted(found, key=lambda m: m.version)


def _only_comments(statement: str) -> bool:
    return all(not line.strip() or line.strip().startswith("--") for line in statement.splitlines())
