"""A stored delivery is parsed once while its bytes stay the same; a changed row is refused."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from contracts import ErrorCode, ExecsysError
from host._core import AdmittedCache
from tests.host.harness import graph_doc, make_delivery, reply

DOC = graph_doc(
    {
        "one": {"kind": "action", "executor": "one", "outputs": {}, "next": "done"},
        "done": {"kind": "terminal", "outcome": "succeeded"},
    },
    "one",
)


async def _one(_request: Any) -> Any:
    return reply({})


def test_a_delivery_is_parsed_once_and_a_tampered_row_is_still_refused(
    harness: Any, tmp_path: Path
) -> None:
    h = harness({"one": _one})
    delivery = make_delivery(DOC)
    h.run(delivery)
    did = delivery.delivery_id
    first = h.host.delivery(did)
    assert h.host.delivery(did) is first, "the same bytes: the same parse"
    assert first == delivery

    db = sqlite3.connect(tmp_path / "state.db")
    # The digest column altered, the document not: the kept parse does not hide it.
    (digest,) = db.execute("SELECT digest FROM execsys_deliveries").fetchone()
    db.execute("UPDATE execsys_deliveries SET digest = ?", ("sha256:" + "0" * 64,))
    db.commit()
    with pytest.raises(ExecsysError) as caught:
        h.host.delivery(did)
    assert caught.value.code is ErrorCode.STORE_ERROR
    db.execute("UPDATE execsys_deliveries SET digest = ?", (digest,))
    # The document altered (another nonce), the digest not: parsed again, and refused.
    (document,) = db.execute("SELECT document FROM execsys_documents").fetchone()
    db.execute(
        "UPDATE execsys_documents SET document = ?",
        (bytes(document).replace(b'"nonce":"', b'"nonce":"x'),),
    )
    db.commit()
    db.close()
    with pytest.raises(ExecsysError) as caught:
        h.host.delivery(did)
    assert caught.value.code is ErrorCode.STORE_ERROR


def test_the_cache_keeps_a_bounded_number_of_deliveries_and_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cache = AdmittedCache()
    documents = {
        f"d{n}": make_delivery(DOC, nonce=f"n{n}").model_dump_json().encode() for n in range(5)
    }
    monkeypatch.setattr(AdmittedCache, "ENTRIES", 3)
    parsed = {did: cache.parsed(did, doc) for did, doc in documents.items()}
    assert cache.parsed("d4", documents["d4"]) is parsed["d4"]
    assert cache.parsed("d0", documents["d0"]) is not parsed["d0"], "the oldest went"
    monkeypatch.setattr(AdmittedCache, "BYTES", len(documents["d1"]) + 1)
    cache.parsed("d1", documents["d1"])
    again = cache.parsed("d2", documents["d2"])
    assert cache.parsed("d2", documents["d2"]) is again, "the newest always stays"
    assert cache.parsed("d1", documents["d1"]) is not parsed["d1"], "past the bytes bound"
