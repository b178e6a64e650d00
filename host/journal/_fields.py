"""An event's fields as the journal keeps them, and the policy check of a header.

Helpers of :class:`host.journal.Journal` that need none of its state: reading an
event's fields back from a stored line, building a typed event over fields
already checked, and checking that an authority policy is the one a journal
header binds.
"""

from __future__ import annotations

from typing import Any

from contracts._delivery import AuthorityPolicy
from contracts._errors import ErrorCode, error
from contracts._journal import JournalEvent, JournalHeader
from host.journal._codec import DIGEST_KEY, at, loads_json
from host.journal._state import authority_digest


def fields_of(line: bytes) -> dict[str, Any]:
    """An event's JSON fields, read back from the stored line this journal wrote."""
    fields: dict[str, Any] = loads_json(line)
    del fields[DIGEST_KEY]
    return fields


#: Every field of an event: a trusted event sets them all.
_EVENT_FIELDS = frozenset(JournalEvent.model_fields)


def trusted_event(values: dict[str, Any]) -> JournalEvent:
    """A :class:`JournalEvent` over ``values`` without validating them again.

    Only for values that already satisfy the schema: every field present, in
    declaration order, each either validated where the command was built or
    derived by the journal (digests, ordinal, time, states) and already checked
    by the append. This is ``model_construct`` minus its per-field default and
    alias handling, which a complete, alias-free field set never needs.
    """
    event = JournalEvent.__new__(JournalEvent)
    object.__setattr__(event, "__dict__", values)
    object.__setattr__(event, "__pydantic_fields_set__", set(_EVENT_FIELDS))
    object.__setattr__(event, "__pydantic_extra__", None)
    object.__setattr__(event, "__pydantic_private__", None)
    return event


def verify_policy(header: JournalHeader, policy: AuthorityPolicy) -> None:
    """Refuse a policy that is not the one the header binds, or that names no approver."""
    if authority_digest(policy) != header.authority:
        raise error(
            ErrorCode.JOURNAL_UNVERIFIED_AUTHORITY,
            "the authority policy is not the one the journal header binds",
            path=at(0),
            expected=header.authority,
        )
    # A policy that grants no roles authorizes no human step, so there is nothing
    # for a human to have approved; one that grants roles must name its approver.
    if policy.actors and policy.approver is None:
        raise error(
            ErrorCode.JOURNAL_UNVERIFIED_AUTHORITY,
            "the authority policy has no human approver",
            path=at(0),
        )
