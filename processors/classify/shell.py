"""Shell lines parsed into the commands they run: separators, heredocs, line continuations,
wrappers (`sudo`, `env`, `timeout`) and shells given a script (`bash -lc '...'`)."""

from __future__ import annotations

import re
import shlex

_WRAPPERS = frozenset(
    {"sudo", "env", "time", "nohup", "nice", "ionice", "timeout", "xargs", "command", "exec",
     "stdbuf", "doas"}
)  # fmt: skip
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh", "fish"})
_SEPARATORS = frozenset({";", "&&", "||", "|", "&", "|&", ";;", "(", ")"})
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


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
