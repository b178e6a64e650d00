"""One hand-written mutant: a snippet of a rule module, its replacement and its tests."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    """``original`` occurs exactly once in ``file`` and is replaced by ``replacement``."""

    id: str
    what: str
    file: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    equivalent: str | None = None
