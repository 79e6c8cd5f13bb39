"""The one error importers raise: a file they cannot read, said in one line."""

from __future__ import annotations


class ImportFormatError(ValueError):
    """The file is not in a format an importer reads, or breaks its format; the message names
    the file and, where it can, the line, run and message."""
