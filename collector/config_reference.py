"""The configuration reference (deploy/CONFIGURATION.md), generated from the config dataclasses.

Each option's explanation is the comment written above its field in the source (or at the end
of its line), and each section's is its class docstring, so the reference cannot drift from the
code: `python -m mast_otel.collector.config_reference > deploy/CONFIGURATION.md` rewrites it
and a test checks that the file in the repository is what this module produces.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import io
import textwrap
import tokenize
from dataclasses import dataclass
from typing import Any

import yaml

from mast_otel.collector.config import Config

OUTPUT = "deploy/CONFIGURATION.md"
COMMAND = "python -m mast_otel.collector.config_reference > deploy/CONFIGURATION.md"


@dataclass(frozen=True)
class Option:
    key: str
    default: Any
    description: str


@dataclass(frozen=True)
class Section:
    key: str
    description: str
    source: str
    options: tuple[Option, ...]


def _class_node(cls: type) -> tuple[ast.ClassDef, str]:
    source = textwrap.dedent(inspect.getsource(cls))
    node = ast.parse(source).body[0]
    if not isinstance(node, ast.ClassDef):
        raise TypeError(f"{cls.__qualname__} is not a class definition")
    return node, source


def field_comments(cls: type) -> dict[str, str]:
    """Each field's comment: the comment lines right above it, then any comment at the end of
    its line(s), joined into one paragraph."""
    node, source = _class_node(cls)
    comments: dict[int, str] = {}
    code_lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments[tok.start[0]] = tok.string.lstrip("#").strip()
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            code_lines.update(range(tok.start[0], tok.end[0] + 1))
    found: dict[str, str] = {}
    for stmt in node.body:
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
            continue
        above: list[str] = []
        line = stmt.lineno - 1
        while line in comments and line not in code_lines:
            above.insert(0, comments[line])
            line -= 1
        end = stmt.end_lineno or stmt.lineno
        trailing = [
            comments[n] for n in range(stmt.lineno, end + 1) if n in comments and n in code_lines
        ]
        text = " ".join(part for part in [*above, *trailing] if part)
        found[stmt.target.id] = text
    return found


def public_name(cls: type) -> str:
    """Where a reader imports `cls` from: its package, when the package's public face lists
    it in `__all__` (the configuration's sections, defined in modules of `collector.config`),
    else the module that defines it."""
    module = cls.__module__
    package = module.rpartition(".")[0]
    if package:
        face = importlib.import_module(package)
        if cls.__name__ in getattr(face, "__all__", ()) and getattr(face, cls.__name__) is cls:
            module = package
    return f"{module}.{cls.__qualname__}"


def class_description(cls: type) -> str:
    node, _ = _class_node(cls)
    return " ".join((ast.get_docstring(node) or "").split())


def sections(config: Any = None, prefix: str = "") -> list[Section]:
    """The sections of `config` (the defaults when None) in declaration order, depth first."""
    config = Config() if config is None else config
    cls = type(config)
    comments = field_comments(cls)
    options: list[Option] = []
    nested: list[Section] = []
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        key = f"{prefix}.{f.name}" if prefix else f.name
        if dataclasses.is_dataclass(value):
            nested.extend(sections(value, key))
        else:
            options.append(Option(key, value, comments.get(f.name, "")))
    own = Section(
        key=prefix,
        description=class_description(cls),
        source=public_name(cls),
        options=tuple(options),
    )
    return [own, *nested]


def _yaml_scalar(value: Any) -> str:
    text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
    return text.removesuffix("\n...").removesuffix("...").strip()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(all_sections: list[Section] | None = None) -> str:
    """The reference as Markdown."""
    all_sections = sections() if all_sections is None else all_sections
    out = [
        "# Configuration reference",
        "",
        f"Generated from the configuration classes (`{COMMAND}`); a test checks that this "
        "file is up to date, so edit the comments in the code, not this file.",
        "",
        "`mast-otel serve --config FILE` reads a YAML file holding any subset of these keys "
        "(the rest keep their defaults); `--grpc-endpoint`, `--http-endpoint` and "
        "`--data-dir` override the file. An unknown key or a bad value stops the start with "
        "the key to fix. `deploy/config.example.yaml` lists every key at its default; "
        "`deploy/examples/` holds a file per deployment shape.",
        "",
    ]
    for section in all_sections:
        title = section.key or "(top level)"
        out += [f"## `{title}`", ""]
        if section.description:
            out += [section.description, ""]
        out += [f"Defined by `{section.source}`.", ""]
        if not section.options:
            continue
        out += ["| option | default | what it does |", "|---|---|---|"]
        lists: list[Option] = []
        for option in section.options:
            if isinstance(option.default, list | tuple):
                lists.append(option)
                default = f"{len(option.default)} entries, below"
            else:
                default = f"`{_cell(_yaml_scalar(option.default))}`"
            out.append(f"| `{option.key}` | {default} | {_cell(option.description)} |")
        out.append("")
        for option in lists:
            block = yaml.safe_dump(
                {option.key.rsplit(".", 1)[-1]: list(option.default)},
                default_flow_style=False,
                width=10_000,
                sort_keys=False,
            )
            out += [f"Default of `{option.key}`:", "", "```yaml", block.rstrip(), "```", ""]
    return "\n".join(out).rstrip() + "\n"


def undocumented(all_sections: list[Section] | None = None) -> list[str]:
    """Options and sections without an explanation (a test keeps this empty)."""
    all_sections = sections() if all_sections is None else all_sections
    missing = [o.key for s in all_sections for o in s.options if not o.description]
    missing += [f"{s.key} (section)" for s in all_sections if s.key and not s.description]
    return missing


if __name__ == "__main__":
    print(render(), end="")
