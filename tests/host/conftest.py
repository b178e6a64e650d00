from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.host.harness import Behaviour, Harness


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[object]:
    made: list[Harness] = []

    def make(behaviours: dict[str, Behaviour], **kw: object) -> Harness:
        h = Harness(tmp_path, behaviours, **kw)  # type: ignore[arg-type]
        made.append(h)
        return h

    yield make
    for h in made:
        h.close()
