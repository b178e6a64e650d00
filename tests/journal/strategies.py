"""Hypothesis strategies for journal records and tampering."""

from __future__ import annotations

from datetime import UTC

from hypothesis import strategies as st

from contracts import Digest, NodeId
from contracts._journal import (
    MAX_JOURNAL_INT,
    ActivationRef,
    Actor,
    ActorKind,
    Approval,
    AttemptRef,
    Batch,
    ErrorInfo,
    InvalidationInfo,
    JournalEvent,
    NodeState,
    RecordRef,
    SuccessorInfo,
    Transition,
)

digests = st.text("0123456789abcdef", min_size=64, max_size=64).map(lambda h: Digest("sha256:" + h))
#: Any text the journal may carry: every code point but lone surrogates, control chars included.
texts = st.text(st.characters(codec="utf-8"), max_size=40)
tokens = st.text(st.characters(codec="utf-8"), min_size=1, max_size=20)
node_ids = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_-]{0,12}\Z").map(NodeId)
counts = st.integers(min_value=1, max_value=MAX_JOURNAL_INT)
times = (
    st.datetimes(timezones=st.just(UTC))
    .map(lambda d: d.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    .filter(lambda s: len(s) == 27)
)

record_refs = st.builds(RecordRef, kind=tokens, id=tokens, digest=digests)
actors = st.builds(Actor, id=tokens, kind=st.sampled_from(ActorKind), role=st.none() | tokens)
events = st.builds(
    JournalEvent,
    execution=tokens,
    ordinal=counts,
    prior=digests,
    request=tokens,
    request_digest=digests,
    node=node_ids,
    activation=counts,
    prior_state=st.sampled_from(NodeState),
    result_state=st.sampled_from(NodeState),
    transition=st.sampled_from(Transition),
    actor=actors,
    time=times,
    rationale=texts,
    attempt=st.none() | st.builds(AttemptRef, id=tokens, sequence=counts),
    refs=st.lists(record_refs, max_size=3).map(tuple),
    authorization=st.none() | record_refs,
    approvals=st.lists(
        st.builds(
            Approval, actor=tokens, kind=st.sampled_from(ActorKind), role=tokens, record=record_refs
        ),
        max_size=2,
    ).map(tuple),
    error=st.none() | st.builds(ErrorInfo, code=tokens, message=texts),
    predecessors=st.lists(
        st.builds(ActivationRef, node=node_ids, activation=counts), max_size=3
    ).map(tuple),
    batch=st.none() | st.builds(Batch, index=counts, size=counts),
    invalidation=st.none() | st.builds(InvalidationInfo, source=record_refs, policy=tokens),
    successor=st.none() | st.builds(SuccessorInfo, execution=tokens, header=digests),
)
"""Schema-valid events with arbitrary content (not necessarily admissible by the rules)."""


@st.composite
def single_byte_changes(draw: st.DrawFn, data: bytes) -> bytes:
    """``data`` with exactly one byte replaced by a different value."""
    index = draw(st.integers(min_value=0, max_value=len(data) - 1))
    value = draw(st.integers(min_value=0, max_value=255).filter(lambda b: b != data[index]))
    return data[:index] + bytes([value]) + data[index + 1 :]
