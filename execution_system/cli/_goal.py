"""``execsys goal create | start | status | resume | cancel | audit | export | apply``."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import shlex
import sys
from pathlib import Path
from typing import Any

from contracts import ErrorCode, error
from execution_system.cli._options import add_lease_ttl
from execution_system.cli._output import emit, emit_json, terminal_safe
from execution_system.cli._signals import interruptible

DEFAULT_CHECK = "tests=PYTHON -m pytest -q -p no:cacheprovider, PYTHON = the project's Python"


def register(commands: Any) -> None:
    """Add the ``goal`` command group."""
    goal = commands.add_parser("goal", help="CodeClosure: carry a code change to closeout")
    sub = goal.add_subparsers(dest="goal_command", metavar="SUBCOMMAND")
    sub.required = True

    create = sub.add_parser("create", help="create a goal (nothing runs yet)")
    create.add_argument("--objective", metavar="TEXT", help="what should be true")
    create.add_argument("--project", metavar="DIR", help="the project folder")
    create.add_argument(
        "--from",
        dest="source",
        metavar="GOAL",
        help="start from GOAL's settings (a FAILED or BLOCKED goal, with a fixed worker); "
        "options given here replace them",
    )
    create.add_argument(
        "--criterion",
        action="append",
        default=[],
        metavar="TEXT",
        help="an acceptance criterion (repeat; at least one)",
    )
    create.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="NAME=CMD",
        help=f"a verification check (repeat; default: {DEFAULT_CHECK})",
    )
    create.add_argument(
        "--required",
        action="append",
        metavar="NAME",
        help="a check that must pass (repeat; default: every check)",
    )
    create.add_argument(
        "--protect",
        action="append",
        metavar="PATH",
        help="add a path or glob (**/x.py) the implementation may not change "
        "(always protected: tests, conftest.py, test configuration, CI files)",
    )
    create.add_argument(
        "--unprotect",
        action="append",
        default=[],
        metavar="PATH",
        help="drop one entry of the default protected set (recorded in the goal)",
    )
    create.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="NAME",
        help="a folder name to leave out of the candidate, its snapshots and digests, "
        "wherever it is (repeat; always left out: .git, virtual environments, caches)",
    )
    create.add_argument(
        "--python",
        metavar="PATH",
        help="the project's interpreter (default: PROJECT/.venv, PROJECT/venv, python3 on PATH)",
    )
    create.add_argument(
        "--allow-fewer-tests",
        action="append",
        default=[],
        metavar="NAME",
        help="a check that may select fewer tests than the base (repeat)",
    )
    create.add_argument(
        "--max-generations",
        type=int,
        default=None,
        metavar="N",
        help="candidate generations repairs may create (default 3)",
    )
    worker = create.add_mutually_exclusive_group(required=True)
    worker.add_argument(
        "--worker-command", metavar="CMD", help="a CLI coding agent speaking the executor protocol"
    )
    worker.add_argument(
        "--agent-command",
        metavar="CMD",
        help="any CLI coding agent, run in the candidate with {prompt_file} replaced "
        "(see examples/agents/)",
    )
    worker.add_argument(
        "--patch",
        action="append",
        metavar="FILE",
        help="scripted worker: generation N applies the Nth patch (repeat)",
    )
    create.add_argument(
        "--ask", metavar="QUESTION", help="scripted worker: ask this first (an action-input)"
    )
    _common(create)
    create.set_defaults(handler=_create)

    for name, help_text in (
        ("start", "start a READY goal"),
        ("resume", "continue a BLOCKED goal under your authority"),
        ("cancel", "cancel a goal (recorded CANCELLED, never CLOSED)"),
    ):
        command = sub.add_parser(name, help=help_text)
        command.add_argument("goal", metavar="GOAL", help="goal id")
        command.add_argument(
            "--expected-version",
            type=int,
            required=True,
            metavar="N",
            help="the version 'goal status' showed (stale ones are refused)",
        )
        if name == "start":
            command.add_argument(
                "--authority",
                metavar="FILE",
                help="authority policy (default: you are the maintainer)",
            )
        else:
            command.add_argument("--reason", required=True, metavar="TEXT", help="why")
        _common(command)
        add_lease_ttl(command)
        command.set_defaults(handler=_lifecycle, action=name)

    status = sub.add_parser("status", help="phase, run status, attempt, generation, decision")
    status.add_argument("goal", metavar="GOAL", nargs="?", help="goal id (default: list)")
    _common(status)
    status.set_defaults(handler=_status)

    export = sub.add_parser("export", help="the accepted change, as a diff or a git bundle")
    export.add_argument("goal", metavar="GOAL", help="goal id")
    export.add_argument(
        "--format",
        choices=["patch", "bundle"],
        default="patch",
        help="patch: a unified diff (default); bundle: one git commit in a bundle file",
    )
    export.add_argument(
        "--output", metavar="FILE", help="write it here (default: stdout; required for a bundle)"
    )
    export.add_argument(
        "--keep-history",
        action="store_true",
        help="keep the rejected generations' savepoints (default: only the base and the accepted)",
    )
    _common(export)
    export.set_defaults(handler=_export)

    apply = sub.add_parser("apply", help="apply the accepted change to a clean copy of the base")
    apply.add_argument("goal", metavar="GOAL", help="goal id")
    apply.add_argument("--to", required=True, metavar="DIR", help="a clean checkout of the base")
    _common(apply)
    apply.set_defaults(handler=_apply)

    audit = sub.add_parser("audit", help="the goal's journal and decisions, readable")
    audit.add_argument("goal", metavar="GOAL", help="goal id")
    _common(audit)
    audit.set_defaults(handler=_audit)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="URL", help="store URL")
    parser.add_argument("--json", action="store_true", help="print a JSON document")


def _runtime(args: argparse.Namespace, *, creating: bool = False) -> Any:
    """The goals on ``--store``; only ``goal create`` may create the store."""
    from execution_system.codeclosure import GoalRuntime

    return GoalRuntime(
        args.store, lease_ttl=getattr(args, "lease_ttl", None), existing=not creating
    )


def _create(args: argparse.Namespace) -> int:
    from execution_system.codeclosure import (
        DEFAULT_PROTECTED,
        CommandWorker,
        PatchWorker,
        parse_check,
    )

    if args.source is None and (args.objective is None or args.project is None):
        from contracts import ErrorCode, error

        raise error(
            ErrorCode.USAGE,
            "a new goal needs --objective and --project",
            path="goal create",
            expected="--objective TEXT --project DIR, or --from GOAL",
        )
    checks = dict(parse_check(text) for text in args.check)
    unknown = [p for p in args.unprotect if p not in DEFAULT_PROTECTED]
    if unknown:
        from contracts import ErrorCode, error

        raise error(
            ErrorCode.GOAL_INVALID,
            f"{unknown[0]!r} is not in the default protected set",
            path="--unprotect",
            expected="one of " + ", ".join(DEFAULT_PROTECTED),
        )
    protected: list[str] | None = [p for p in DEFAULT_PROTECTED if p not in args.unprotect]
    assert protected is not None
    protected += [p for p in args.protect or [] if p not in protected]
    if args.source is not None and not args.unprotect and not args.protect:
        protected = None  # the source goal's
    worker: Any
    if args.worker_command:
        worker = CommandWorker(argv=tuple(shlex.split(args.worker_command)))
    elif args.agent_command:
        from pathlib import Path

        from execution_system.codeclosure import AgentWorker

        words = shlex.split(args.agent_command)
        if words and "/" in words[0] and Path(words[0]).is_file():
            words[0] = str(Path(words[0]).resolve())  # the agent runs in the candidate
        worker = AgentWorker(argv=tuple(words))
    else:
        from pathlib import Path

        worker = PatchWorker(
            patches=tuple(str(Path(p).resolve()) for p in args.patch), ask=args.ask
        )
    given: dict[str, Any] = {
        "objective": args.objective,
        "project": args.project,
        "criteria": args.criterion or None,
        "checks": checks or None,
        "required": args.required,
        "protected": protected,
        "max_generations": args.max_generations,
        "python": args.python,
        "allow_fewer": args.allow_fewer_tests or None,
        "exclude": args.exclude or None,
    }
    # --from reads a goal, so its store must exist: a mistyped one is not created.
    runtime = _runtime(args, creating=args.source is None)
    try:
        if args.source is not None:
            view = runtime.create_from(args.source, worker=worker, **given)
        else:
            defaults = {"criteria": [], "checks": {}, "max_generations": 3}
            chosen = {k: (defaults.get(k) if v is None else v) for k, v in given.items()}
            view = runtime.create(worker=worker, **chosen)
    finally:
        runtime.close()
    return _show(view, args.json)


def _lifecycle(args: argparse.Namespace) -> int:
    runtime = _runtime(args)
    try:
        if args.action == "start":
            authority = None
            if args.authority:
                from execution_system import load_document, parse_authority

                authority = parse_authority(load_document(args.authority))
            started = runtime.start(args.goal, args.expected_version, authority=authority)
            view = asyncio.run(interruptible(runtime.host, started))
        elif args.action == "resume":
            resumed = runtime.resume(args.goal, args.expected_version, args.reason)
            view = asyncio.run(interruptible(runtime.host, resumed))
        else:
            view = asyncio.run(runtime.cancel(args.goal, args.expected_version, args.reason))
    finally:
        runtime.close()
    _show(view, args.json)
    if args.action in {"start", "resume"} and view["run_status"] in {"FAILED", "BLOCKED"}:
        # The goal did not get anywhere good: say so in the exit status and on stderr.
        from contracts import ErrorCode, error

        code = ErrorCode.GOAL_FAILED if view["run_status"] == "FAILED" else ErrorCode.GOAL_BLOCKED
        ended = error(
            code,
            f"the goal ended {view['run_status']} in {view['phase']}: {view['detail']}",
            path=view["goal"],
            expected=f"next: {view['next']}",
        )
        sys.stderr.write(f"execsys: {terminal_safe(ended.one_line())}\n")
        return 1
    return 0


def _status(args: argparse.Namespace) -> int:
    runtime = _runtime(args)
    try:
        if args.goal is None:
            goals = runtime.list()
            if args.json:
                emit_json({"goals": goals})
                return 0
            for goal in goals:
                emit(
                    f"{goal['goal']}  v{goal['version']}  {goal['run_status']:<17}  "
                    f"{goal['objective'][:60]}"
                )
            return 0
        view = runtime.view(args.goal)
    finally:
        runtime.close()
    return _show(view, args.json)


def _show(view: dict[str, Any], as_json: bool) -> int:
    if as_json:
        emit_json(view)
        return 0
    emit(f"goal {view['goal']} (version {view['version']}): {view['objective']}")
    emit(f"  phase       {view['phase']}")
    emit(f"  run status  {view['run_status']} - {view['detail']}")
    emit(f"  generation  {view['generation']}    attempt {view['attempt']}")
    if view.get("next"):
        emit(f"  next        {view['next']}")
    for note in view.get("notes") or []:
        emit(f"  note        {note}")
    decision = view.get("decision")
    if decision:
        emit(
            f"  decision    {decision['decision']} (generation {decision['generation']}, "
            f"manifest {decision['manifest']})"
        )
        if decision.get("feedback"):
            emit(f"              {decision['feedback']}")
    for candidate in view.get("candidates", []):
        emit(
            f"  candidate   generation {candidate['generation']}: {candidate['state']}"
            + (f", frozen {candidate['frozen']}" if candidate.get("frozen") else "")
        )
    question = view.get("question")
    if question:
        emit(f"  question    {question['question']}")
        emit(
            f"              answer: execsys input {view['delivery']} --correlation "
            f"{question['correlation']} --response FILE"
        )
    wait = view.get("wait")
    if wait:
        emit(
            f"  waiting     for a {wait['kind']} at {wait['node']}: execsys resolve "
            f"{view['delivery']} --node {wait['node']} --actor YOU --role maintainer "
            "--result FILE"
        )
    return 0


def _export(args: argparse.Namespace) -> int:
    if args.format == "bundle" and not args.output:
        raise error(
            ErrorCode.USAGE,
            "a bundle is binary: name the file it goes to",
            path="--format bundle",
            expected="--output FILE",
        )
    runtime = _runtime(args)
    try:
        output = Path(args.output) if args.output else None
        report = runtime.export(
            args.goal,
            args.format,
            output if args.format == "bundle" else None,
            keep_history=args.keep_history,
        )
        text = ""
        if report["format"] == "bundle":
            artifact = _file_digest(Path(args.output))
        else:
            text = (
                f"# execsys goal export {report['goal']}: the accepted change\n"
                f"# base {report['base']}\n# accepted {report['frozen']}\n"
                f"# manifest {report['manifest']}\n"
            ) + report["patch"]
            if args.output:
                Path(args.output).write_text(text, encoding="utf-8")
            artifact = "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
        report["artifact"] = artifact
        runtime.record_export(
            args.goal, report["format"], args.output, artifact, report["manifest"]
        )
    finally:
        runtime.close()
    if report["format"] == "bundle":
        return _exported_bundle(args, report)
    summary = {
        k: report[k] for k in ("goal", "format", "base", "frozen", "manifest", "files", "artifact")
    }
    summary.update(_released(report))
    if args.json:
        emit_json({**summary, "output": args.output, **({} if args.output else {"patch": text})})
    elif args.output:
        emit(
            f"goal {report['goal']}: {len(report['files'])} changed file(s) -> {args.output} "
            f"({artifact}, manifest {report['manifest']})"
        )
    else:
        sys.stdout.write(text)
    return 0


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def _released(report: dict[str, Any]) -> dict[str, Any]:
    """What the export released and pruned, as both export formats report it."""
    keys = ("workspace_released", "savepoints_pruned", "archive_savepoints_pruned")
    return {key: report[key] for key in keys if key in report}


def _exported_bundle(args: argparse.Namespace, report: dict[str, Any]) -> int:
    keys = (
        "goal",
        "format",
        "base",
        "frozen",
        "manifest",
        "files",
        "ref",
        "commit",
        "parent",
        "artifact",
    )
    summary = {k: report[k] for k in keys}
    summary["prerequisite"] = report["prerequisite"]
    summary.update(_released(report))
    if args.json:
        emit_json({**summary, "output": args.output})
        return 0
    on = "on the project's HEAD" if report["prerequisite"] else "on a root commit of the base"
    emit(
        f"goal {report['goal']}: {len(report['files'])} changed file(s) -> {args.output} "
        f"(commit {report['commit']} {on}, manifest {report['manifest']})"
    )
    emit(f"  fetch it:  git fetch {args.output} {report['ref']}:{report['ref']}")
    return 0


def _apply(args: argparse.Namespace) -> int:
    runtime = _runtime(args)
    try:
        report = runtime.apply(args.goal, args.to)
    finally:
        runtime.close()
    if args.json:
        emit_json(report)
        return 0
    if report["already_applied"]:
        emit(f"goal {report['goal']}: {report['to']} already is the accepted tree; nothing written")
        return 0
    emit(f"goal {report['goal']}: applied {len(report['files'])} changed file(s) to {report['to']}")
    for path in report["files"]:
        emit(f"  {path}")
    emit(f"  now {report['frozen']} (manifest {report['manifest']})")
    return 0


def _audit(args: argparse.Namespace) -> int:
    runtime = _runtime(args)
    try:
        report = runtime.audit(args.goal)
    finally:
        runtime.close()
    if args.json:
        emit_json(report)
        return 0
    _show(report, False)
    emit("  journal:")
    for event in report["journal"]:
        error = f"  [{event['error']}]" if event["error"] else ""
        if event.get("reason"):
            error += f" {' '.join(str(event['reason']).split())[:200]}"
        emit(
            f"    {event['ordinal']:>4}  {event['node']:<16} #{event['activation']:<2} "
            f"{event['transition']:<22} -> {event['state']:<11} by {event['actor']}{error}"
        )
    emit("  evidence:")
    for item in report["evidence"]:
        emit(
            f"    {item['check']}: exit {item['exit_status']} in {item['duration_s']}s, bound to "
            f"{item['frozen']} (spec {item['spec'][:19]}...)"
        )
        tests, base = item.get("tests"), item.get("base_tests")
        if tests:
            emit(
                f"      tests: {tests['selected']} selected of {tests['collected']} collected "
                f"({tests['deselected']} deselected), {tests['passed']} passed, "
                f"{tests['failed']} failed, {tests['skipped']} skipped"
                + (f"; the base selected {base['selected']}" if base else "")
            )
    emit("  decisions:")
    for item in report["decisions"]:
        emit(
            f"    #{item['ordinal']} {item['node']}: {item['decision']} over manifest "
            f"{item['manifest']}"
        )
    return 0
