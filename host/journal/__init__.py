"""The transition journal: append rules, projection, codec, verify, replay and audit.

Pure: no storage and no LangGraph. See ``docs/journal.md`` for the record
format, the state table and the refusal codes.
"""

from host.journal._audit import AuditReport, Violation, audit_bundle, audit_journal
from host.journal._bundle import Bundle, encode_bundle, parse_bundle
from host.journal._codec import decode_line, encode_record, ordinal_of, record_digest
from host.journal._commands import AppendCommand, BindSuccessorCommand, InvalidateCommand
from host.journal._header import node_decls
from host.journal._journal import Journal
from host.journal._projection import ActivationView, AttemptView, Projection
from host.journal._replay import replay_lines
from host.journal._signing import generate_key_pair, load_private_key, load_public_key
from host.journal._state import SourceResolver, authority_digest
from host.journal._verify import VerifyReport, export_lines, verify_lines

__all__ = [
    "ActivationView",
    "AppendCommand",
    "AttemptView",
    "AuditReport",
    "BindSuccessorCommand",
    "Bundle",
    "InvalidateCommand",
    "Journal",
    "Projection",
    "SourceResolver",
    "VerifyReport",
    "Violation",
    "audit_bundle",
    "audit_journal",
    "authority_digest",
    "decode_line",
    "encode_bundle",
    "encode_record",
    "export_lines",
    "generate_key_pair",
    "load_private_key",
    "load_public_key",
    "node_decls",
    "ordinal_of",
    "parse_bundle",
    "record_digest",
    "replay_lines",
    "verify_lines",
]
