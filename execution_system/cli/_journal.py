"""``execsys journal export`` and ``execsys journal verify`` (``audit``: see ``_audit``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execution_system.cli._audit import bundle_bytes, register_audit
from execution_system.cli._output import emit, emit_json, terminal_safe

if TYPE_CHECKING:
    from contracts import DeliveryId


def register(commands: Any) -> None:
    """Add the ``journal`` command group."""
    journal = commands.add_parser("journal", help="export or verify a delivery's journal")
    sub = journal.add_subparsers(dest="journal_command", metavar="SUBCOMMAND")
    sub.required = True

    export = sub.add_parser("export", help="write the journal as canonical JSON Lines")
    export.add_argument("delivery", metavar="DELIVERY", help="delivery id")
    export.add_argument("--output", metavar="FILE", help="file to write (default: stdout)")
    export.add_argument(
        "--bundle",
        action="store_true",
        help="write an audit bundle: delivery document, policy, journal and records",
    )
    export.add_argument(
        "--no-records", action="store_true", help="with --bundle: record digests only"
    )
    export.add_argument("--sign", metavar="KEYFILE", help="with --bundle: sign with this key")
    export.add_argument("--store", metavar="URL", help="store URL")
    export.add_argument("--config", metavar="FILE", help="runner config (unused here)")
    export.set_defaults(handler=_export)

    verify = sub.add_parser("verify", help="check a journal's chain, digests and rules")
    verify.add_argument("delivery", metavar="DELIVERY", nargs="?", help="delivery id")
    verify.add_argument("--file", metavar="FILE", help="an exported journal to check offline")
    verify.add_argument("--store", metavar="URL", help="store URL")
    verify.add_argument("--config", metavar="FILE", help="runner config (unused here)")
    verify.add_argument("--json", action="store_true", help="print a JSON document")
    verify.set_defaults(handler=_verify)

    register_audit(sub)


def readable_file(path: Path) -> Path:
    """Return ``path`` if it names a regular file; refuse a directory or a missing file."""
    from contracts import ErrorCode, error

    if path.is_dir():
        raise error(ErrorCode.FILE_NOT_FOUND, "is a directory", path=str(path), expected="a file")
    if not path.is_file():
        raise error(ErrorCode.FILE_NOT_FOUND, "no such file", path=str(path))
    return path


def write_output(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path``; a directory or an unwritable place is one coded refusal."""
    from contracts import ErrorCode, error

    if path.is_dir():
        raise error(
            ErrorCode.FILE_NOT_WRITABLE,
            "is a directory",
            path=str(path),
            expected="a file path to write",
        )
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise error(
            ErrorCode.FILE_NOT_WRITABLE,
            exc.strerror or type(exc).__name__,
            path=str(path),
            expected="a writable file path",
        ) from None


def _stored_lines(delivery: DeliveryId, store: str | None) -> list[bytes]:
    from execution_system._compose import open_runner

    runner = open_runner(store, read_only=True)
    try:
        return runner.host.journal_lines(delivery)
    finally:
        runner.close()


def _export(args: argparse.Namespace) -> int:
    from contracts import ErrorCode, error

    if not args.bundle and (args.no_records or args.sign):
        raise error(
            ErrorCode.USAGE,
            "--no-records and --sign describe a bundle",
            path="execsys journal export",
            expected="--bundle",
        )
    if args.output and Path(args.output).is_dir():
        write_output(Path(args.output), b"")  # refuses before any work is done
    if args.bundle:
        data = bundle_bytes(args.delivery, args.store, records=not args.no_records, sign=args.sign)
        what = "a bundle"
    else:
        lines = _stored_lines(args.delivery, args.store)
        data = b"".join(line + b"\n" for line in lines)
        what = f"{len(lines) - 1} events and the header"
    if args.output:
        write_output(Path(args.output), data)
        emit(f"wrote {what} to {args.output}")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return 0


def _verify(args: argparse.Namespace) -> int:
    from contracts import ErrorCode, error
    from host.journal import verify_lines

    if (args.delivery is None) == (args.file is None):
        raise error(
            ErrorCode.USAGE,
            "name a DELIVERY or --file, not both or neither",
            path="execsys journal verify",
            expected="DELIVERY | --file FILE",
        )
    if args.file:
        path = readable_file(Path(args.file))
        where = str(path)
        # Journals are long by nature: streamed line by line, no document size bound.
        with path.open("rb") as handle:
            report = verify_lines(line.rstrip(b"\n") for line in handle)
    else:
        where = args.delivery
        report = verify_lines(_stored_lines(args.delivery, args.store))
    if args.json:
        emit_json(report.to_json())
    if report.ok:
        if not args.json:
            emit(f"ok: {report.events} events, head {report.head}")
        return 0
    code = report.code.value if report.code else "JOURNAL_MALFORMED_RECORD"
    line = f"execsys: {code} at {where}: ordinal {report.ordinal}: {report.message}"
    sys.stderr.write(terminal_safe(line) + "\n")
    return 1
