"""The Host's journal book: a shortcut that must change nothing, and a bounded cache.

``JournalBook`` turns the three routine transitions of a step straight into
request content (no command model, no validation pass) and hands it to
``Journal.append_content``. These tests pin that shortcut to the validated
path: same request content, same event, same stored line, and anything that is
not routine still goes through validation. The book also keeps only a few
journals of deliveries nobody is driving; a dropped one is rehydrated.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contracts import InvocationRequest
from contracts._errors import ErrorCode, ExecsysError
from contracts._journal import NodeDecl, NodeState, Transition
from host._context import HOST_ACTOR, StepWriter
from host._journal_book import JournalBook, _command, _routine_content
from host.journal import Journal, verify_lines
from tests.host.harness import graph_doc, make_delivery, reply
from tests.journal.scenario import POLICY, header
from tests.journal.strategies import digests, node_ids, texts, tokens

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
HEAD = "sha256:" + "0" * 64


def _draft(
    node: str,
    activation: int,
    transition: str,
    prior: str,
    *,
    attempt: int | None = None,
    refs: list[dict[str, str]] | None = None,
    predecessors: list[list[Any]] | None = None,
    rationale: str = "",
    actor: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The draft the Host's own ``StepWriter.event`` queues for these values."""
    writer = StepWriter(cast(Any, None), {}, node)
    writer.event(
        node,
        activation,
        transition,
        prior,
        "",
        attempt=attempt,
        refs=refs,
        predecessors=predecessors,
        rationale=rationale,
        actor=actor or HOST_ACTOR,
    )
    (draft,) = writer.outbox
    return draft


routine_drafts = st.builds(
    _draft,
    node=node_ids,
    activation=st.integers(1, 2**53 - 1),
    transition=st.sampled_from(["dependencies-satisfied", "work-started", "work-completed"]),
    prior=st.sampled_from([state.value for state in NodeState]),
    attempt=st.none() | st.integers(1, 99),
    refs=st.lists(st.fixed_dictionaries({"kind": tokens, "id": tokens, "digest": digests})),
    predecessors=st.lists(st.tuples(node_ids, st.integers(1, 99)).map(list), max_size=3),
    rationale=texts,
    actor=st.fixed_dictionaries(
        {"id": tokens, "kind": st.just("automation"), "role": st.none() | tokens}
    ),
)


@given(routine_drafts)
def test_routine_content_is_the_validated_commands_content(draft: dict[str, Any]) -> None:
    content = _routine_content(draft)
    assert content is not None
    assert content == _command(draft, HEAD, NOW).request_content()


@pytest.mark.parametrize(
    "extra",
    [
        {"transition": "work-failed"},
        {"transition": "retry-authorized"},
        {"error": {"code": "X", "message": "m"}},
        {"approvals": [{"actor": "a", "role": "r", "record": {}}]},
        {"authorization": {"kind": "k", "id": "i", "digest": HEAD}},
        {"actor": {"id": "ann", "kind": "human", "role": "approver"}},
    ],
)
def test_anything_else_takes_the_validated_path(extra: dict[str, Any]) -> None:
    draft = {**_draft("a", 1, "work-started", "ready", attempt=1), **extra}
    assert _routine_content(draft) is None


def _one_node_journal() -> Journal:
    decl = NodeDecl(id=header().start)
    return Journal.create(header().model_copy(update={"nodes": (decl,)}), POLICY)


def test_content_and_command_append_the_same_bytes() -> None:
    start = header().start
    drafts = [
        _draft(start, 1, "work-started", "ready", attempt=1),
        _draft(start, 1, "work-completed", "active", attempt=1),
    ]
    by_content, by_command = _one_node_journal(), _one_node_journal()
    for draft in drafts:
        content = _routine_content(draft)
        assert content is not None
        by_content.append_content(draft["request"], by_content.head, NOW, content)
        by_command.append(_command(draft, by_command.head, NOW))
    assert by_content.lines_since(0) == by_command.lines_since(0)
    assert by_content.events == by_command.events
    assert by_content.projection() == by_command.projection()


def test_unknown_values_in_content_are_refused_and_append_nothing() -> None:
    start = header().start
    journal = _one_node_journal()
    for transition, prior in (("work-begun", "ready"), ("work-started", "waiting")):
        content = _routine_content(_draft(start, 1, "work-started", "ready", attempt=1))
        assert content is not None
        content.update(transition=transition, expected_state=prior)
        with pytest.raises(ExecsysError) as caught:
            journal.append_content("r", journal.head, NOW, content)
        assert caught.value.code is ErrorCode.JOURNAL_MALFORMED_RECORD
    assert len(journal) == 0


def test_content_goes_through_every_rule() -> None:
    start = header().start
    journal = _one_node_journal()
    # Completing before starting: the state table refuses it, as for a command.
    content = _routine_content(_draft(start, 1, "work-completed", "ready", attempt=1))
    assert content is not None
    with pytest.raises(ExecsysError) as caught:
        journal.append_content("r", journal.head, NOW, content)
    assert caught.value.code is ErrorCode.JOURNAL_INVALID_TRANSITION
    # A batch transition is never a single append.
    content["transition"] = Transition.WORK_INVALIDATED.value
    with pytest.raises(ExecsysError) as caught:
        journal.append_content("r", journal.head, NOW, content)
    assert caught.value.code is ErrorCode.JOURNAL_INVALID_TRANSITION
    assert len(journal) == 0


def _one_action(executor: str) -> dict[str, Any]:
    return graph_doc(
        {
            executor: {
                "kind": "action",
                "executor": executor,
                "outputs": {"answer": {"type": "string"}},
                "next": "done",
            },
            "done": {"kind": "terminal", "outcome": "succeeded"},
        },
        executor,
    )


def test_a_runner_keeps_only_a_few_idle_journals_and_rehydrates_the_rest(
    harness: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def ask(req: InvocationRequest) -> Any:
        if req.turn == 1:
            return {"status": "needs-input", "question": "q", "session": "s"}
        return reply({"answer": str(req.response)})

    async def step(req: InvocationRequest) -> Any:
        return reply({"answer": "a"})

    monkeypatch.setattr(JournalBook, "IDLE", 1)
    h = harness({"asker": ask, "step": step})
    waiting = make_delivery(_one_action("asker"), nonce="waiting")
    suspended = h.run(waiting)
    assert suspended.status.value == "suspended"
    others = [make_delivery(_one_action("step"), nonce=f"other-{i}") for i in range(3)]
    for other in others:
        assert h.run(other).status.value == "completed"
    book = h.host.journals
    # Only the most recent idle journal stays; the suspended one was dropped.
    assert book.cached() == [others[-1].delivery_id]
    # Answering rehydrates its journal from the store (every rule replayed) and goes on.
    done = asyncio.run(h.host.answer(waiting.delivery_id, suspended.suspension.correlation, "y"))
    assert done.status.value == "completed"
    assert verify_lines(h.host.journal_lines(waiting.delivery_id)).ok
    assert h.inspect(waiting).nodes["asker"].attempts == 1
    assert book.cached() == [waiting.delivery_id]
