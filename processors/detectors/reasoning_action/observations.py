"""FM-2.6 `unsupported_observation`'s terms: observations a model may state only once a tool
result has shown them. A term may name one observation in several wordings, separated by
`|` (`OOMKilled|out of memory`): a result showing any of them supports stating any other."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache


class ObservationTerms:
    """The configured terms (lower-cased), and which of them a text states."""

    def __init__(self, terms: list[str]) -> None:
        self.terms = [t.lower() for t in terms]
        self._wordings = [
            (term, tuple(w.strip() for w in term.split("|") if w.strip())) for term in self.terms
        ]
        # The terms a text contains, remembered: the same answers and results recur.
        self.found: Callable[[str], frozenset[str]] = lru_cache(maxsize=4096)(self._found)

    def _found(self, text: str) -> frozenset[str]:
        lowered = text.lower()
        return frozenset(t for t, wordings in self._wordings if any(w in lowered for w in wordings))

    def wording(self, term: str, text: str) -> str:
        """The wording of a term a text uses (the term itself when it has one wording)."""
        lowered = text.lower()
        return next((w.strip() for w in term.split("|") if w.strip() in lowered), term)
