"""The transition journal: append rules, projection, canonical codec, verify and replay.

Pure: no storage and no LangGraph. See ``docs/journal.md`` for the record
format, the state table and the refusal codes.
"""

from host.journal._codec import decode_line, encode_record, ordinal_of, record_digest
from host.journal._commands import AppendCommand, BindSuccessorCommand, InvalidateCommand
from host.journal._journal import Journal
from host.journal._projection import ActivationView, AttemptView, Projection
from host.journal._replay import replay_lines
from host.journal._state import SourceResolver, authority_digest
from host.journal._verify import VerifyReport, export_lines, verify_lines

__all__ = [
    "ActivationView",
    "AppendCommand",
    "AttemptView",
    "BindSuccessorCommand",
    "InvalidateCommand",
    "Journal",
    "Projection",
    "SourceResolver",
    "VerifyReport",
    "authority_digest",
    "decode_line",
    "encode_record",
    "export_lines",
    "ordinal_of",
    "record_digest",
    "replay_lines",
    "verify_lines",
]
