"""``execsys journal export --bundle``, ``execsys journal audit`` and ``execsys keys generate``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from execution_system.cli._output import emit, emit_json

if TYPE_CHECKING:
    from contracts import DeliveryId
    from host.journal import AuditReport


def register_audit(sub: Any) -> None:
    """Add ``journal audit`` to the ``journal`` group's subparsers."""
    audit = sub.add_parser("audit", help="check a delivery completely against its graph and policy")
    audit.add_argument("delivery", metavar="DELIVERY", nargs="?", help="delivery id")
    audit.add_argument("--file", metavar="FILE", help="a bundle, or a plain export with --spec")
    audit.add_argument("--spec", metavar="SPEC", help="the graph a plain export is audited against")
    audit.add_argument("--input", metavar="FILE", help="with --spec: the delivery input")
    audit.add_argument("--authority", metavar="FILE", help="with --spec: the authority policy")
    audit.add_argument(
        "--key", metavar="PUBFILE", help="the public key the bundle must be signed by"
    )
    audit.add_argument("--all", action="store_true", help="report every violation, not the first")
    audit.add_argument("--store", metavar="URL", help="store URL")
    audit.add_argument("--config", metavar="FILE", help="runner config (unused here)")
    audit.add_argument("--json", action="store_true", help="print a JSON document")
    audit.set_defaults(handler=_audit)


def register_keys(commands: Any) -> None:
    """Add the ``keys`` command group."""
    keys = commands.add_parser("keys", help="manage signing keys for audit bundles")
    sub = keys.add_subparsers(dest="keys_command", metavar="SUBCOMMAND")
    sub.required = True
    generate = sub.add_parser("generate", help="write a new Ed25519 key pair")
    generate.add_argument(
        "--output",
        metavar="PREFIX",
        default="execsys-key",
        help="write PREFIX (private, mode 0600) and PREFIX.pub (default: execsys-key)",
    )
    generate.set_defaults(handler=_generate)


def bundle_bytes(
    delivery: DeliveryId, store: str | None, *, records: bool, sign: str | None
) -> bytes:
    """A delivery's bundle, built from the store's document, journal and records."""
    from execution_system._compose import open_runner
    from host.journal import encode_bundle, load_private_key

    key = load_private_key(_read(sign), sign) if sign else None
    runner = open_runner(store, read_only=True)
    try:
        host = runner.host
        document = host.delivery_document(delivery)
        lines = host.journal_lines(delivery)
        retirement = None
        if host.status(delivery).status.value == "retired":
            # Retirement deleted the records; the journal and document remain.
            fact = host.inspect(delivery).retirement
            retirement = fact.fact_json() if fact is not None else None
            records = False
        return encode_bundle(
            document,
            lines,
            host.record if records else None,
            retirement=retirement,
            key=key,
        )
    finally:
        runner.close()


def _read(name: str) -> bytes:
    from execution_system.cli._journal import readable_file

    return readable_file(Path(name)).read_bytes()


def _usage(message: str, expected: str) -> Exception:
    from contracts import ErrorCode, error

    return error(ErrorCode.USAGE, message, path="execsys journal audit", expected=expected)


def _audit(args: argparse.Namespace) -> int:
    from host.journal import audit_bundle, audit_journal, load_public_key

    if (args.delivery is None) == (args.file is None):
        raise _usage("name a DELIVERY or --file, not both or neither", "DELIVERY | --file FILE")
    if args.spec is None and (args.input or args.authority):
        raise _usage("--input and --authority go with --spec", "--file JOURNAL --spec SPEC")
    if args.spec is not None and args.file is None:
        raise _usage("--spec audits a plain export given with --file", "--file JOURNAL")
    key = load_public_key(_read(args.key), args.key) if args.key else None
    if args.spec is not None:
        if key is not None:
            raise _usage("a plain export carries no signature", "--key only with a bundle")
        report = audit_journal(*_plain(args), all_violations=args.all)
        where = args.file
    elif args.file is not None:
        report = audit_bundle(_read(args.file), key=key, all_violations=args.all)
        where = args.file
    else:
        data = bundle_bytes(args.delivery, args.store, records=True, sign=None)
        report = audit_bundle(data, key=key, all_violations=args.all)
        where = args.delivery
    return _print(report, where, args.json)


def _plain(args: argparse.Namespace) -> tuple[list[bytes], Any, Any]:
    from contracts import AuthorityPolicy, ErrorCode, error
    from contracts._schema import validation_problem
    from execution_system import load_document, load_graph, parse_authority
    from host import OPERATIONS

    graph = load_graph(Path(args.spec), operations=frozenset(OPERATIONS))
    policy = parse_authority(load_document(args.authority)) if args.authority else AuthorityPolicy()
    if args.input:
        problem = validation_problem(graph.input, load_document(args.input))
        if problem is not None:
            raise error(
                ErrorCode.INPUT_INVALID,
                problem[1],
                path=f"{args.input}:{problem[0]}" if problem[0] else args.input,
                expected="an input the spec's input schema admits",
            )
    lines = [line.rstrip(b"\n") for line in _read(args.file).splitlines()]
    return lines, graph, policy


def _print(report: AuditReport, where: str, as_json: bool) -> int:
    if as_json:
        emit_json(report.to_json())
    else:
        emit(report.to_text())
    if report.ok:
        return 0
    first = report.violations[0]
    at = "" if first.ordinal is None else f": ordinal {first.ordinal}"
    sys.stderr.write(f"execsys: {first.code.value} at {where}{at}: {first.message}\n")
    return 1


def _generate(args: argparse.Namespace) -> int:
    from contracts import ErrorCode, error
    from execution_system.cli._journal import write_output
    from host.journal import generate_key_pair

    private_path, public_path = Path(args.output), Path(args.output + ".pub")
    for path in (private_path, public_path):
        if path.exists():
            raise error(
                ErrorCode.FILE_NOT_WRITABLE,
                "already exists; a key is never overwritten",
                path=str(path),
                expected="a new file name (--output PREFIX)",
            )
    private, public = generate_key_pair()
    try:
        # Created 0600 from the start: the private key is never readable by others.
        fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise error(
            ErrorCode.FILE_NOT_WRITABLE,
            exc.strerror or type(exc).__name__,
            path=str(private_path),
            expected="a writable file path",
        ) from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(private)
    write_output(public_path, public)
    emit(f"wrote private key {private_path} (mode 0600) and public key {public_path}")
    return 0
