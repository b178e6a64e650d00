"""The storage port's conformance suite: every backend in ``BACKENDS`` must pass it.

The tests speak only the port (``Storage``/``StorageTx``) and the Host core
that sits on it (``LeaseManager``, ``check_token``, the journal book and
``write_step_rows``); the one backend-specific step, writing a LangGraph
checkpoint row, comes from the backend entry.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from contracts import ExecsysError, canonical_bytes, digest_of
from host._journal_book import JournalBook
from host._lease import LeaseManager, check_token, holder_name
from host._step_rows import write_step_rows
from host.storage import Storage
from tests.host.harness import graph_doc, make_delivery
from tests.host.test_journal_book import _draft
from tests.storage.backends import Backend

ROOT = Path(__file__).resolve().parents[2]
Connect = Callable[[], Storage]


class Boom(Exception):
    """Raised inside a transaction to make it roll back."""


def _admit(storage: Storage, delivery: str = "d-1", graph: str = "g") -> None:
    with storage.transaction() as tx:
        tx.insert_delivery(delivery, graph, "sha256:g", "sha256:" + delivery, b'{"doc": 1}')


def _record(value: object) -> tuple[str, bytes]:
    return str(digest_of(value)), canonical_bytes(value)


# --- transactions ----------------------------------------------------------------------


def test_a_transaction_commits_everything_together(storage: Storage, connect: Connect) -> None:
    digest, body = _record({"x": 1})
    with storage.transaction() as tx:
        tx.insert_delivery("d-1", "g", "sha256:g", "sha256:d", b"doc")
        tx.put_record(digest, body)
        tx.append_journal("d-1", [(0, "sha256:h0", b"header")])
        assert tx.delivery("d-1") is not None, "a transaction sees its own writes"
    other = connect()
    row = other.delivery("d-1")
    assert row is not None
    assert (row["status"], row["outcome"], row["document"]) == ("running", None, b"doc")
    assert other.get_record(digest) == {"x": 1}
    assert other.journal_lines("d-1") == [b"header"]


def test_a_raising_body_leaves_nothing(storage: Storage, connect: Connect) -> None:
    digest, body = _record({"x": 2})
    with pytest.raises(Boom), storage.transaction() as tx:  # noqa: PT012
        tx.insert_delivery("d-1", "g", "sha256:g", "sha256:d", b"doc")
        tx.put_record(digest, body)
        tx.append_journal("d-1", [(0, "sha256:h0", b"header")])
        raise Boom
    other = connect()
    assert other.delivery("d-1") is None
    assert other.journal_lines("d-1") == []
    with pytest.raises(ExecsysError) as missing:
        other.get_record(digest)
    assert missing.value.code.value == "STORE_ERROR"
    # The handle is usable afterwards.
    _admit(storage)
    assert other.delivery("d-1") is not None


def test_a_duplicate_delivery_is_refused(storage: Storage) -> None:
    _admit(storage)
    with pytest.raises(storage.errors), storage.transaction() as tx:
        tx.insert_delivery("d-1", "g", "sha256:g", "sha256:other", b"doc")


def test_status_detail_and_listing(storage: Storage) -> None:
    _admit(storage, "d-1", "g")
    _admit(storage, "d-2", "h")
    with storage.transaction() as tx:
        tx.set_status("d-1", "suspended", None, {"message": "asked", "n": [1]}, "cp-1")
    with storage.transaction() as tx:
        tx.set_status("d-1", "completed", "succeeded", {"message": "done"}, None)
    row = storage.delivery("d-1")
    assert row is not None
    assert (row["status"], row["outcome"], row["checkpoint"]) == ("completed", "succeeded", "cp-1")
    assert row["detail"] == {"message": "done"}
    listed = storage.deliveries()
    assert [r["delivery"] for r in listed] == ["d-1", "d-2"], "latest change first"
    page, total = storage.page_deliveries(limit=1, graph="h")
    assert total == 1 and [r["delivery"] for r in page] == ["d-2"]
    page, total = storage.page_deliveries(limit=10, status="completed")
    assert total == 1 and page[0]["status"] == "completed"
    later, total = storage.page_deliveries(limit=10, changed_since=time.time() + 60)
    assert (later, total) == ([], 0)


# --- records ---------------------------------------------------------------------------


def test_queued_deliveries_are_listed_oldest_first_and_claimed_once(
    storage: Storage, connect: Connect
) -> None:
    for name in ("d-1", "d-2", "d-3"):
        _admit(storage, name)
    with storage.transaction() as tx:
        for name in ("d-2", "d-1"):
            tx.set_status(name, "queued", None, {"message": "queued", "keep": 1}, None)
            time.sleep(0.01)  # distinct change times: d-2 waits longest
    assert storage.queued(10) == ["d-2", "d-1"]
    assert storage.queued(1) == ["d-2"]
    with storage.transaction() as tx:
        assert tx.claim_queued("d-2", "claimed") is True
    with connect().transaction() as tx:
        assert tx.claim_queued("d-2", "again") is False, "a claimed delivery is not queued"
        assert tx.claim_queued("d-3", "never") is False, "a running delivery is not queued"
    row = storage.delivery("d-2")
    assert row is not None
    assert (row["status"], row["detail"]) == ("running", {"message": "claimed", "keep": 1})
    assert storage.queued(10) == ["d-1"]


def test_runner_heartbeats_list_the_leases_their_process_holds(
    storage: Storage, connect: Connect
) -> None:
    _admit(storage, "d-1")
    _admit(storage, "d-2")
    with storage.lease_transaction() as tx:
        tx.put_lease("d-1", "m1:41:abc", 1, time.time() + 60)
        tx.put_lease("d-2", "m1:4:abc", 1, time.time() + 60)  # another pid, not a prefix match
    storage.beat_runner("r1", "m1", 41, 1000.0)
    first = connect().runners()
    storage.beat_runner("r1", "m1", 41, 1000.0)
    [row] = connect().runners()
    assert (row["name"], row["host"], row["pid"], row["started"]) == ("r1", "m1", 41, 1000.0)
    assert row["deliveries"] == ["d-1"]
    assert row["heartbeat"] >= first[0]["heartbeat"]
    storage.drop_runner("r1")
    assert connect().runners() == []


def test_records_are_stored_once_per_digest(storage: Storage) -> None:
    digest, body = _record({"same": True})
    _admit(storage)
    for _ in range(2):
        with storage.transaction() as tx:
            tx.put_record(digest, body)
            tx.put_record_ref("d-1", digest)
            assert tx.has_record(digest)
    # A second body under a stored digest changes nothing (content addressing).
    with storage.transaction() as tx:
        tx.put_record(digest, canonical_bytes({"other": 1}))
    assert storage.get_record(digest) == {"same": True}
    with storage.transaction() as tx:
        assert not tx.has_record("sha256:" + "0" * 64)


# --- journal ----------------------------------------------------------------------------


def test_journal_lines_keep_ordinal_order_and_refuse_a_taken_ordinal(storage: Storage) -> None:
    _admit(storage)
    with storage.transaction() as tx:
        tx.append_journal("d-1", [(0, "sha256:a", b"h")])
        tx.append_journal("d-1", [(1, "sha256:b", b"e1"), (2, "sha256:c", b"e2")])
        assert tx.journal_head("d-1") == ("sha256:c", 2)
    with pytest.raises(storage.errors), storage.transaction() as tx:
        tx.append_journal("d-1", [(3, "sha256:d", b"e3"), (2, "sha256:x", b"again")])
    assert storage.journal_lines("d-1") == [b"h", b"e1", b"e2"]
    assert storage.journal_head("d-1") == ("sha256:c", 2)
    assert storage.journal_head("d-none") == (None, 0)


def _step(storage: Storage, backend: Backend, book: JournalBook, checkpoint: str) -> None:
    """One committed step: a checkpoint row, a record and a journal event, in one transaction."""
    value = {"ok": True}
    digest = str(digest_of(value))
    outbox = [{"type": "record", "digest": digest, "value": value}]
    values = {"run": {"status": "running"}, "savepoint": {"head": "sp-" + checkpoint}}
    with storage.transaction() as tx:
        backend.put_checkpoint(tx, "d-1", checkpoint)
        write_step_rows(tx, book, _derive, "d-1", checkpoint, values, outbox, True)


def _derive(values: dict[str, object], more: bool) -> tuple[str, str | None, dict[str, object]]:
    return "running", None, {"savepoint": "sp"}


def test_journal_and_host_rows_commit_with_the_checkpoint_or_not_at_all(
    storage: Storage, backend: Backend, connect: Connect
) -> None:
    nodes = {
        "a": {"kind": "action", "executor": "x", "outputs": {}, "next": "b"},
        "b": {"kind": "terminal", "outcome": "succeeded"},
    }
    delivery = make_delivery(graph_doc(nodes, "a"), nonce="x")
    did = delivery.delivery_id
    book = JournalBook(storage)
    with storage.transaction() as tx:
        tx.insert_delivery(did, "t", delivery.graph_digest, delivery.digest, b"{}")
        book.create(tx, delivery, "tests")
    drafts = [
        {"type": "record", "digest": str(digest_of({"v": 1})), "value": {"v": 1}},
        _draft("a", 1, "work-started", "ready", attempt=1),
    ]
    with pytest.raises(Boom), storage.transaction() as tx:  # noqa: PT012
        backend.put_checkpoint(tx, did, "cp-1")
        write_step_rows(tx, book, _derive, did, "cp-1", {}, drafts, True)
        raise Boom
    book.forget(did)  # as the Host does when a step's transaction fails
    other = connect()
    assert other.latest_checkpoint(did) is None
    assert other.checkpoint_events(did, "cp-1") == 0
    assert len(other.journal_lines(did)) == 1
    with storage.transaction() as tx:
        backend.put_checkpoint(tx, did, "cp-2")
        write_step_rows(tx, book, _derive, did, "cp-2", {}, drafts, True)
    assert other.latest_checkpoint(did) == "cp-2"
    row = other.delivery(did)
    assert row is not None and row["checkpoint"] == "cp-2"
    assert row["detail"]["journal"] == {"head": book.journal(did).head, "events": 1}
    assert len(other.journal_lines(did)) == 2
    assert other.get_record(drafts[0]["digest"]) == {"v": 1}
    assert other.savepoint_checkpoints(did)[0]["checkpoint"] == "cp-2"


# --- fencing and leases --------------------------------------------------------------------


def test_a_stale_token_refuses_the_whole_write(storage: Storage, connect: Connect) -> None:
    _admit(storage)
    with storage.lease_transaction() as tx:
        tx.put_lease("d-1", "someone", 7, time.time() + 60)
    for stale in (None, 6):
        with pytest.raises(ExecsysError) as fenced, storage.transaction() as tx:  # noqa: PT012
            check_token(tx, "d-1", stale)
            tx.set_status("d-1", "failed", None, {}, None)
        assert fenced.value.code.value == "LEASE_FENCED"
    with pytest.raises(ExecsysError), storage.transaction() as tx:  # noqa: PT012
        tx.set_status("d-1", "failed", None, {}, None)
        check_token(tx, "d-1", 6)  # a check after the write still undoes it
    row = connect().delivery("d-1")
    assert row is not None and row["status"] == "running"
    with storage.transaction() as tx:
        check_token(tx, "d-1", 7)
        tx.set_status("d-1", "failed", None, {}, None)
    row = connect().delivery("d-1")
    assert row is not None and row["status"] == "failed"


def test_a_fenced_transaction_applies_only_under_the_current_token(
    storage: Storage, connect: Connect
) -> None:
    _admit(storage)
    with storage.lease_transaction() as tx:
        tx.put_lease("d-1", "someone", 7, time.time() + 60)
    with pytest.raises(ExecsysError) as fenced, storage.fenced_transaction("d-1", 6) as tx:
        tx.set_status("d-1", "failed", None, {}, None)
    assert fenced.value.code.value == "LEASE_FENCED"
    assert "fencing token 7" in repr(fenced.value), "the refusal names the current token"
    row = connect().delivery("d-1")
    assert row is not None and row["status"] == "running"
    with storage.fenced_transaction("d-1", 7) as tx:
        tx.set_status("d-1", "failed", None, {}, None)
        tx.request_stop("d-1", 1.0, "op")
    row = connect().delivery("d-1")
    assert row is not None and row["status"] == "failed"
    assert connect().stop_request("d-1") == "op"


def _manager(storage: Storage, tmp_path: Path, tag: str, ttl: float) -> LeaseManager:
    return LeaseManager(storage, tmp_path / "locks", holder_name(tag), ttl)


def test_lease_acquire_renew_release(storage: Storage, connect: Connect, tmp_path: Path) -> None:
    mine = _manager(storage, tmp_path, "a", 60)
    rival = _manager(connect(), tmp_path, "b", 60)
    try:
        assert mine.acquire("d-1") == 1
        with pytest.raises(ExecsysError) as held:
            rival.acquire("d-1")
        assert held.value.code.value == "LEASE_HELD"
        assert mine.renew("d-1")
        assert rival.state("d-1")["state"] == "held"
        mine.release("d-1")
        assert rival.state("d-1")["state"] == "released"
        assert rival.acquire("d-1") == 2, "a released lease is granted at once, token + 1"
        with pytest.raises(ExecsysError) as fenced, mine.transaction("d-1"):
            pass
        assert fenced.value.code.value == "LEASE_FENCED"
    finally:
        rival.close()
        mine.close()


def test_a_first_grant_is_only_for_a_delivery_never_stored_nor_leased(
    storage: Storage, connect: Connect, tmp_path: Path
) -> None:
    later = time.time() + 60
    assert storage.grant_first_lease("d-new", "someone", later)
    assert storage.lease("d-new") == ("someone", 1, later)
    assert not connect().grant_first_lease("d-new", "rival", later), "leased before"
    assert storage.lease("d-new") == ("someone", 1, later), "a refused grant writes nothing"
    _admit(storage, "d-stored")
    assert not storage.grant_first_lease("d-stored", "someone", later), "stored already"
    assert storage.lease("d-stored") is None
    mine = _manager(storage, tmp_path, "a", 60)
    try:
        assert mine.acquire_new("d-other") == 1
        assert mine.state("d-other")["state"] == "held"
        with pytest.raises(ExecsysError) as held:
            mine.acquire_new("d-other")
        assert held.value.code.value == "LEASE_HELD"
        mine.release("d-other")
        assert mine.acquire_new("d-other") is None, "released, not new: the general path"
        assert mine.acquire("d-other") == 2
    finally:
        mine.close()


def test_an_expired_lease_is_stolen_and_its_holder_fenced(
    storage: Storage, connect: Connect, tmp_path: Path
) -> None:
    _admit(storage)
    stale = _manager(storage, tmp_path, "stale", 0.05)
    rival = _manager(connect(), tmp_path, "rival", 60)
    try:
        assert stale.acquire("d-1") == 1
        # No renewer runs (no event loop): the lease expires after its TTL.
        assert rival.acquire("d-1", wait_s=30) == 2
        assert not stale.renew("d-1"), "a renewal finds the lease taken over"
        assert stale.lost("d-1")
        with pytest.raises(ExecsysError) as fenced, stale.transaction("d-1") as tx:
            tx.set_status("d-1", "failed", None, {}, None)
        assert fenced.value.code.value == "LEASE_FENCED"
        with pytest.raises(ExecsysError):
            stale.check("d-1")
        with rival.transaction("d-1") as tx:
            tx.set_status("d-1", "completed", "succeeded", {}, None)
        stale.release("d-1")  # giving back a lost lease leaves the new holder's alone
        assert rival.state("d-1")["state"] == "held"
        row = storage.delivery("d-1")
        assert row is not None and row["status"] == "completed"
    finally:
        rival.close()
        stale.close()


# --- stop requests and retirement ----------------------------------------------------------


def test_a_stop_request_is_kept_until_cleared(storage: Storage, connect: Connect) -> None:
    _admit(storage)
    assert storage.stop_request("d-1") is None
    with storage.transaction() as tx:
        tx.request_stop("d-1", time.time(), '{"actor": "op"}')
        tx.request_stop("d-1", time.time(), '{"actor": "op2"}')
    assert connect().stop_request("d-1") == '{"actor": "op2"}'
    with storage.transaction() as tx:
        tx.clear_stop("d-1")
        tx.clear_stop("d-1")
    assert connect().stop_request("d-1") is None


@pytest.mark.parametrize("batched", [False, True], ids=["one-by-one", "put_records"])
def test_retirement_deletes_once_and_keeps_shared_records(
    storage: Storage, backend: Backend, connect: Connect, batched: bool
) -> None:
    shared, shared_body = _record({"shared": 1})
    own, own_body = _record({"own": 1})
    for did in ("d-1", "d-2"):
        _admit(storage, did)
    with storage.transaction() as tx:
        backend.put_checkpoint(tx, "d-1", "cp-1")
        tx.index_checkpoint("d-1", "cp-1", "sp-1", 1)
        if batched:  # a step's records, a digest repeated among them
            tx.put_records("d-1", [(shared, shared_body), (own, own_body), (own, own_body)])
            tx.put_records("d-2", [(shared, canonical_bytes({"other": 1}))])
        else:
            for did, digest, body in (("d-1", shared, shared_body), ("d-1", own, own_body)):
                tx.put_record(digest, body)
                tx.put_record_ref(did, digest)
            tx.put_record_ref("d-2", shared)
        tx.append_journal("d-1", [(0, "sha256:h", b"header")])
    fact = {"delivery": "d-1", "authorization": "auth-1"}
    with storage.transaction() as tx:
        assert tx.retirement("d-1") is None
        tx.retire("d-1", "auth-1", fact, "succeeded")
    other = connect()
    assert other.retirement_fact("d-1") == fact
    with other.transaction() as tx:
        assert tx.retirement("d-1") == ("auth-1", fact)
    row = other.delivery("d-1")
    assert row is not None and (row["status"], row["outcome"]) == ("retired", "succeeded")
    assert other.latest_checkpoint("d-1") is None
    assert other.savepoint_checkpoints("d-1") == []
    assert other.get_record(shared) == {"shared": 1}, "another delivery still references it"
    with pytest.raises(ExecsysError):
        other.get_record(own)
    assert other.journal_lines("d-1") == [b"header"], "the journal outlives retirement"
    # A second retirement of the same delivery is refused by the store itself.
    with pytest.raises(storage.errors), storage.transaction() as tx:
        tx.retire("d-1", "auth-2", {"again": True}, "succeeded")
    assert other.retirement_fact("d-1") == fact


# --- concurrent processes ------------------------------------------------------------------

_WORKER = """
import json, sys, time
from pathlib import Path
from host._lease import LeaseManager, holder_name
{child}
while not Path(GO).exists():  # start together, so that the holders overlap
    time.sleep(0.005)
leases = LeaseManager(storage, Path(LOCKS), holder_name("w" + sys.argv[1]), 30.0)
tokens = []
for _ in range(ROUNDS):
    token = leases.acquire("d-1", wait_s=60.0)
    # Read and write in two transactions: only the lease keeps another writer out between.
    with leases.transaction("d-1") as tx:
        _, ordinal = tx.journal_head("d-1")
    time.sleep(0.002)  # widen the window another writer would need
    with leases.transaction("d-1") as tx:
        row = (ordinal + 1, "sha256:" + str(token), sys.argv[1].encode())
        tx.append_journal("d-1", [row])
    tokens.append(token)
    leases.release("d-1")
leases.close()
storage.close()
print(json.dumps(tokens))
"""


def test_processes_sharing_a_store_write_one_at_a_time(
    storage: Storage, backend: Backend, location: str, tmp_path: Path
) -> None:
    _admit(storage)
    with storage.transaction() as tx:
        tx.append_journal("d-1", [(0, "sha256:h", b"header")])
    rounds, workers = 25, 3
    go = tmp_path / "go"
    source = (
        f"LOCATION = {location!r}\nLOCKS = {str(tmp_path / 'locks')!r}\nROUNDS = {rounds}\n"
        f"GO = {str(go)!r}\n" + _WORKER.format(child=textwrap.dedent(backend.child))
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", source, str(i)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(workers)
    ]
    go.touch()
    results = [(proc.communicate(timeout=110), proc.returncode) for proc in procs]
    tokens: list[int] = []
    for (out, err), code in results:
        assert code == 0, err
        mine = json.loads(out)
        assert mine == sorted(mine), "each process sees its tokens grow"
        tokens.extend(mine)
    assert sorted(tokens) == list(range(1, rounds * workers + 1)), "every grant got its own token"
    lines = storage.journal_lines("d-1")
    assert len(lines) == rounds * workers + 1, "no fenced write was lost or doubled"
    assert storage.journal_head("d-1") == ("sha256:" + str(max(tokens)), rounds * workers)
