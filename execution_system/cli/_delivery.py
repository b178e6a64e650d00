"""``execsys run | status | inspect | input | resolve``."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid
from pathlib import Path
from typing import Any

from contracts import DeliveryStatus, ExecsysError
from execution_system.cli._options import add_lease_ttl, add_queue
from execution_system.cli._output import emit, emit_json, terminal_safe


def add_store(parser: argparse.ArgumentParser) -> None:
    """``--store``, ``--config`` and ``--json``."""
    parser.add_argument(
        "--store",
        metavar="URL",
        help="store URL (default: EXECSYS_STORE or sqlite:///.execsys/state.db)",
    )
    parser.add_argument("--config", metavar="FILE", help="runner config (executor bindings)")
    parser.add_argument("--json", action="store_true", help="print a JSON document")


def register(commands: Any) -> None:
    """Add the delivery commands."""
    run = commands.add_parser("run", help="admit a delivery and run it to its next stop")
    add_admission(run)
    run.set_defaults(handler=_run)

    status = commands.add_parser("status", help="one delivery's status, or all deliveries")
    status.add_argument("delivery", metavar="DELIVERY", nargs="?", help="delivery id")
    add_store(status)
    status.set_defaults(handler=_status)

    inspect = commands.add_parser("inspect", help="status, node states, attempts and heads")
    inspect.add_argument("delivery", metavar="DELIVERY", help="delivery id")
    add_store(inspect)
    inspect.set_defaults(handler=_inspect)

    answer = commands.add_parser("input", help="answer a pending action-input question")
    answer.add_argument("delivery", metavar="DELIVERY", help="delivery id")
    answer.add_argument("--correlation", required=True, metavar="ID", help="the question's id")
    answer.add_argument("--response", required=True, metavar="FILE", help="answer (file or -)")
    add_store(answer)
    add_lease_ttl(answer)
    add_queue(answer)
    answer.set_defaults(handler=_input)

    resolve = commands.add_parser("resolve", help="resolve a pending workflow wait")
    resolve.add_argument("delivery", metavar="DELIVERY", help="delivery id")
    resolve.add_argument("--node", required=True, metavar="NODE", help="the wait node")
    resolve.add_argument("--actor", required=True, metavar="ACTOR", help="who resolves")
    resolve.add_argument("--role", required=True, metavar="ROLE", help="under which role")
    resolve.add_argument("--result", required=True, metavar="FILE", help="result (file or -)")
    add_store(resolve)
    add_lease_ttl(resolve)
    add_queue(resolve)
    resolve.set_defaults(handler=_resolve)


def delivery_failure(report: Any) -> ExecsysError | None:
    """The error a failed or blocked delivery means for the command that drove it."""
    from contracts import ErrorCode, error

    status = report.status.value
    if status not in {"failed", "intervention"}:
        return None
    codes = {code.value: code for code in ErrorCode}
    if status == "intervention":
        code = codes.get(report.outcome or "", ErrorCode.INTERVENTION_REQUIRED)
        return error(
            code,
            f"the delivery needs a directive: {report.message or 'nothing runs until one'}",
            path=report.delivery,
            expected=f"'execsys inspect {report.delivery}', then 'execsys recover' "
            "with a directive",
        )
    code = codes.get(report.outcome or "", ErrorCode.DELIVERY_FAILED)
    return error(
        code,
        f"the delivery failed: {report.message or report.outcome or 'see execsys inspect'}",
        path=report.delivery,
    )


def print_status(report: Any, as_json: bool, *, drove: bool = True) -> int:
    """Print a delivery's status; when this command ``drove`` it, say why it failed on stderr."""
    failure = delivery_failure(report) if drove else None
    if failure is not None:
        sys.stderr.write(f"execsys: {terminal_safe(failure.one_line())}\n")
    if as_json:
        document = report.public()
        if failure is not None:
            document["error"] = failure.to_json()
        emit_json(document)
    else:
        outcome = f" ({report.outcome})" if report.outcome else ""
        emit(f"delivery {report.delivery}: {report.status.value}{outcome}")
        if report.message:
            emit(f"  {report.message}")
        for question in report.suspensions:
            emit(
                f"  question from '{question.node}' (correlation {question.correlation}): "
                f"{question.question}"
            )
            emit(
                f"  answer with: execsys input {report.delivery} --correlation "
                f"{question.correlation} --response FILE"
            )
        if report.wait is not None:
            emit(
                f"  waiting for {report.wait.kind} at '{report.wait.node}': "
                f"execsys resolve {report.delivery} --node {report.wait.node} --actor NAME "
                f"--role ROLE --result FILE"
            )
    return 1 if report.status.value in {"failed", "intervention"} else 0


def admitted_from_args(args: argparse.Namespace) -> tuple[Any, Path]:
    """Validate ``run``/``submit`` arguments and admit the delivery they name.

    Returns the admitted delivery and the folder its executor commands resolve from.
    """
    from contracts import digest_of
    from execution_system import admit, load_document, load_graph, parse_authority
    from execution_system._compose import (
        config_path,
        factory_config,
        lease_ttl_s,
        load_runner_config,
    )
    from host import OPERATIONS

    factory_config(args.store)  # a malformed store URL is reported before anything else
    lease_ttl_s(args.lease_ttl)  # so is a malformed lease TTL
    spec = Path(args.spec)
    graph = load_graph(spec, operations=frozenset(OPERATIONS))
    value = load_document(args.input) if args.input else {}
    cfg_path = config_path(args.config, spec)
    config = load_runner_config(cfg_path)
    authority = parse_authority(load_document(args.authority)) if args.authority else None
    nonce = digest_of({"key": args.key}) if args.key else uuid.uuid4().hex
    delivery = admit(
        graph,
        value,
        authority=authority,
        executors=config.executors,
        operations=frozenset(OPERATIONS),
        nonce=nonce,
    )
    return delivery, cfg_path.parent.absolute() if cfg_path else spec.parent


def add_admission(parser: argparse.ArgumentParser) -> None:
    """The arguments ``run`` and ``submit`` share."""
    parser.add_argument("spec", metavar="SPEC", help="control-graph spec (YAML or JSON)")
    parser.add_argument("--input", metavar="FILE", help="delivery input (YAML/JSON file, or -)")
    parser.add_argument("--authority", metavar="FILE", help="authority policy (YAML)")
    parser.add_argument("--seed", metavar="DIR", help="copy DIR into the delivery's workspace")
    parser.add_argument(
        "--key",
        metavar="KEY",
        help="idempotency key: the same spec, input and key name the same delivery",
    )
    add_store(parser)
    add_lease_ttl(parser)


def _run(args: argparse.Namespace) -> int:
    from execution_system._compose import open_runner

    delivery, executors_dir = admitted_from_args(args)
    from execution_system.cli._progress import follow, wanted

    runner = open_runner(args.store, executors_dir, lease_ttl=args.lease_ttl)
    try:
        report = asyncio.run(
            follow(
                runner.host,
                delivery.delivery_id,
                runner.host.run(delivery, seed=args.seed),
                enabled=wanted(args.json),
            )
        )
    finally:
        runner.close()
    return print_status(report, args.json)


def _status(args: argparse.Namespace) -> int:
    from execution_system._compose import open_runner

    runner = open_runner(args.store, read_only=True)
    try:
        if args.delivery:
            print_status(runner.host.status(args.delivery), args.json, drove=False)
            return 0
        rows = runner.host.deliveries()
        attention = runner.host.needs_directive()
    finally:
        runner.close()
    if args.json:
        emit_json(
            {
                "deliveries": [r.to_json() for r in rows],
                "needs_directive": [a.to_json() for a in attention],
            }
        )
        return 0
    if not rows:
        emit("no deliveries")
    else:
        width = max(len(r.graph) for r in rows)
        for r in rows:
            outcome = r.outcome or ""
            emit(f"{r.delivery}  {r.graph:<{width}}  {r.status:<12} {outcome:<20} {r.updated}")
    if attention:
        emit("")
        emit("needs a directive (nothing runs until an operator decides):")
        for item in attention:
            for reason in item.reasons:
                emit(f"  {item.delivery} ({item.status}): {reason}")
        emit("  -> execsys inspect DELIVERY, then execsys recover DELIVERY --directive ...")
    return 0


def _inspect(args: argparse.Namespace) -> int:
    from execution_system._compose import open_runner

    runner = open_runner(args.store, read_only=True)
    try:
        report = runner.host.inspect(args.delivery)
    finally:
        runner.close()
    if args.json:
        emit_json(report.to_json())
        return 0
    emit(
        f"delivery {report.delivery} ({report.graph}): {report.status}"
        + (f" ({report.outcome})" if report.outcome else "")
    )
    if report.message:
        emit(f"  {report.message}")
    if report.status is DeliveryStatus.RETIRED:
        fact = report.retirement
        emit(
            f"  retired under authorization {fact.authorization if fact else None}; journal head "
            f"{fact.journal.head if fact else None} "
            f"({fact.journal.events if fact else None} events)"
        )
        return 0
    emit(f"  checkpoint {report.checkpoint}")
    emit(f"  journal    {report.journal.events} events, head {report.journal.head}")
    emit(
        f"  custody    checkpoint expects {report.custody.savepoint}, "
        f"custody head is {report.custody.head}"
    )
    for problem in report.mismatches:
        emit(f"  MISMATCH   {problem}")
    if report.needs_directive:
        emit(f"  NEEDS A DIRECTIVE: {report.needs_directive}")
    for attempt in report.interrupted:
        emit(
            f"  interrupted: '{attempt.node}' activation {attempt.activation} "
            f"attempt {attempt.attempt} ({attempt.reason}); 'recover --directive "
            "continue' ends it as history and starts a new attempt"
        )
    emit("  nodes:")
    for node, view in report.nodes.items():
        emit(
            f"    {node:<24} {view.state:<12} activations {view.activations:<3} "
            f"attempts {view.attempts}"
        )
    for question in report.suspensions:
        emit(
            f"  pending question at '{question.node}' (correlation "
            f"{question.correlation}): {question.question}"
        )
    for wait in report.waits:
        emit(
            f"  pending {wait.kind} at '{wait.node}': {wait.approvals} of "
            f"{wait.needed} approvals, roles {', '.join(wait.roles)}"
        )
    if report.savepoints:
        emit("  savepoints (for restart-from-savepoint):")
        for sp in report.savepoints:
            emit(f"    {sp.savepoint}  first at checkpoint {sp.first}")
    emit("  directives now: " + (", ".join(report.directives) or "none"))
    return 0


def _input(args: argparse.Namespace) -> int:
    from execution_system import load_document
    from execution_system._compose import open_runner

    response = load_document(args.response)
    runner = open_runner(
        args.store,
        Path(args.config).parent.absolute() if args.config else None,
        existing=True,
        lease_ttl=args.lease_ttl,
    )
    from execution_system.cli._progress import follow, wanted

    try:
        report = asyncio.run(
            follow(
                runner.host,
                args.delivery,
                runner.host.answer(args.delivery, args.correlation, response, queue=args.queue),
                enabled=wanted(args.json) and not args.queue,
            )
        )
    finally:
        runner.close()
    return print_status(report, args.json, drove=not args.queue)


def _resolve(args: argparse.Namespace) -> int:
    from execution_system import load_document
    from execution_system._compose import open_runner

    result = load_document(args.result)
    runner = open_runner(
        args.store,
        Path(args.config).parent.absolute() if args.config else None,
        existing=True,
        lease_ttl=args.lease_ttl,
    )
    from execution_system.cli._progress import follow, wanted

    try:
        report = asyncio.run(
            follow(
                runner.host,
                args.delivery,
                runner.host.resolve(
                    args.delivery, args.node, args.actor, args.role, result, queue=args.queue
                ),
                enabled=wanted(args.json) and not args.queue,
            )
        )
    finally:
        runner.close()
    return print_status(report, args.json, drove=not args.queue)
