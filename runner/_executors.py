"""Executor backends: Python callables, commands, and scripted replies.

Every backend turns whatever the executor does into exactly one
``InvocationResult``; misbehaviour (bad JSON, extra output, a crash, a hang)
becomes a ``Failed`` with a stable code, never an exception in the Host.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import shutil
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError

from contracts import (
    CommandBinding,
    ErrorCode,
    ExecutorBinding,
    PythonBinding,
    ScriptedBinding,
    domain_problem,
)
from contracts._invocation import (
    LAUNCH_ENV,
    LAUNCHER_ENV,
    Completed,
    Failed,
    InvocationRequest,
    InvocationResult,
    NeedsInput,
)
from host._launches import launcher_tag, runner_identity

# Discriminated on ``status``, so a malformed reply is reported against the shape it names.
_RESULT: TypeAdapter[InvocationResult] = TypeAdapter(
    Annotated[InvocationResult, Field(discriminator="status")]
)
_REAP_GRACE_S = 5.0
_TERM_GRACE_S = 3.0  # the shim's own 1 s grace for the executor, plus its cleanup
_SHIM = str(Path(__file__).with_name("_shim.py"))
_SHIM_START_FAILED = 127
_SHIM_MARKER = "execsys-shim: cannot start"
#: Deepest nesting a reply may have: the bound every document has (execution_system.MAX_DEPTH).
_MAX_REPLY_DEPTH = 64


def parse_result(value: Any) -> InvocationResult:
    """Validate an executor's reply; a malformed one is a protocol failure."""
    if isinstance(value, Completed | NeedsInput | Failed):
        value = value.model_dump(mode="json")
    # The Host digests what it commits (RFC 8785): NaN, infinities, integers beyond 2^53,
    # sets and other objects are refused here, before anything reads the reply.
    problem = domain_problem(value, max_depth=_MAX_REPLY_DEPTH)
    if problem is not None:
        return Failed(
            reason="protocol-error",
            code=ErrorCode.EXECUTOR_PROTOCOL_ERROR,
            detail=f"reply is not plain JSON: {problem}"[:300],
        )
    try:
        result = _RESULT.validate_python(value)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        return Failed(
            reason="protocol-error",
            code=ErrorCode.EXECUTOR_PROTOCOL_ERROR,
            detail=f"malformed reply at {where or 'top level'}: {first['msg']}"[:300],
        )
    if isinstance(result, Failed) and result.code is ErrorCode.NODE_FAILED:
        return result
    if isinstance(result, Failed):
        # An executor reports a closed reason; the classification is the Host's.
        return result.model_copy(update={"code": ErrorCode.NODE_FAILED})
    return result


class Executors:
    """The default invoker: dispatches a turn to the backend its binding names."""

    def __init__(self, base_dir: Path | None = None) -> None:
        self.base_dir = (base_dir or Path.cwd()).resolve()
        self._functions: dict[str, Callable[..., Awaitable[Any]]] = {}

    async def __call__(
        self,
        request: InvocationRequest,
        binding: ExecutorBinding,
        *,
        capability: str,
        workspace: str | None,
    ) -> InvocationResult:
        """Run one turn."""
        if isinstance(binding, PythonBinding):
            return await self._python(request, binding)
        if isinstance(binding, CommandBinding):
            return await run_command(
                request, binding, capability=capability, workspace=workspace, base_dir=self.base_dir
            )
        return _scripted(request, binding)

    def _function(self, target: str, path: str | None) -> Callable[..., Awaitable[Any]]:
        found = self._functions.get(target)
        if found is None:
            module_name, _, attr = target.partition(":")
            folder = path or str(self.base_dir)
            if folder not in sys.path:
                sys.path.insert(0, folder)
            module = importlib.import_module(module_name)
            found = getattr(module, attr)
            if not callable(found):
                raise TypeError(f"{target} is not callable")
            self._functions[target] = found
        return found

    async def _python(self, request: InvocationRequest, binding: PythonBinding) -> InvocationResult:
        try:
            function = self._function(binding.python, binding.path)
        except Exception as exc:
            return Failed(
                reason="import-failed",
                code=ErrorCode.EXECUTOR_IMPORT_FAILED,
                detail=f"{binding.python}: {type(exc).__name__}: {exc}"[:300],
            )
        try:
            # In this task: wait_for would start another one per turn.
            async with asyncio.timeout(binding.timeout_s):
                reply = await function(request)
        except TimeoutError:
            return Failed(
                reason="timeout",
                code=ErrorCode.EXECUTOR_TIMEOUT,
                retryable=True,
                detail=f"no reply within {binding.timeout_s:g} s",
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return Failed(
                reason="raised",
                code=ErrorCode.EXECUTOR_RAISED,
                detail=f"{type(exc).__name__}: {exc}"[:300],
            )
        return parse_result(reply)


def _scripted(request: InvocationRequest, binding: ScriptedBinding) -> InvocationResult:
    # Deterministic in the request, so a re-run after a crash replays the same reply.
    index = (request.activation - 1) + (request.attempt - 1) + (request.turn - 1)
    reply = binding.scripted[min(index, len(binding.scripted) - 1)]
    return parse_result(reply)


def _resolve_argv(argv: tuple[str, ...], base_dir: Path) -> list[str]:
    """Relative paths that exist beside the config file become absolute (cwd is the workspace)."""
    resolved = []
    for arg in argv:
        candidate = base_dir / arg
        if "/" in arg and not os.path.isabs(arg) and candidate.exists():
            resolved.append(str(candidate))
        else:
            resolved.append(arg)
    return resolved


async def run_command(
    request: InvocationRequest,
    binding: CommandBinding,
    *,
    capability: str,
    workspace: str | None,
    base_dir: Path,
) -> InvocationResult:
    """Run a command executor for one turn under the protocol of docs/executors.md."""
    argv = _resolve_argv(binding.command, base_dir)
    env = {**os.environ, **binding.env, "EXECSYS_CAPABILITY": capability}
    env[LAUNCH_ENV] = request.invocation
    env[LAUNCHER_ENV] = launcher_tag(runner_identity())
    if workspace:
        env["EXECSYS_WORKSPACE"] = workspace
    missing = _not_executable(argv[0], env.get("PATH"), workspace)
    if missing:
        return Failed(
            reason="start-failed", code=ErrorCode.EXECUTOR_START_FAILED, detail=missing[:300]
        )
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            # The shim supervises the turn: see runner/_shim.py.
            sys.executable,
            "-I",
            "-S",
            _SHIM,
            str(os.getpid()),
            *argv,
            cwd=workspace or None,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group: a deadline kills all of it
        )
    )
    try:
        process = await asyncio.shield(spawn)
    except asyncio.CancelledError:
        # Cancelled mid-start, asyncio would kill the leader alone and then wait for
        # pipes its children still hold; let the start finish and end the turn.
        with contextlib.suppress(Exception):
            started = await spawn
            await _end_turn(started)
        raise
    except OSError as exc:
        return Failed(
            reason="start-failed",
            code=ErrorCode.EXECUTOR_START_FAILED,
            detail=f"{argv[0]}: {exc.strerror or exc}"[:300],
        )
    try:
        stdout, stderr, too_large = await asyncio.wait_for(
            _communicate(process, json.dumps(request.wire()).encode(), binding.max_output_bytes),
            timeout=binding.timeout_s,
        )
    except TimeoutError:
        await _end_turn(process)
        return Failed(
            reason="timeout",
            code=ErrorCode.EXECUTOR_TIMEOUT,
            retryable=True,
            detail=f"killed at the {binding.timeout_s:g} s deadline",
        )
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await asyncio.shield(_end_turn(process))
        raise
    code = await process.wait()
    if too_large:
        return Failed(
            reason="protocol-error",
            code=ErrorCode.EXECUTOR_PROTOCOL_ERROR,
            detail=f"reply exceeds {binding.max_output_bytes} bytes",
        )
    return _classify(code, stdout, stderr)


async def _communicate(
    process: asyncio.subprocess.Process, data: bytes, limit: int
) -> tuple[bytes, bytes, bool]:
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    stdin = process.stdin

    async def feed() -> None:
        # Concurrently with the readers: a child that writes before it has read
        # all of a large request would otherwise block on a full pipe, and so
        # would we.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.write(data)
            await stdin.drain()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stdin.close()

    async def reply(stream: asyncio.StreamReader) -> tuple[bytes, bool]:
        chunks: list[bytes] = []
        size = 0
        while chunk := await stream.read(65536):
            size += len(chunk)
            if size > limit:
                # Past the bound the reply is void: end the turn now, then read to EOF.
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(process.pid, signal.SIGTERM)
                await _drain(stream)
                return b"", True
            chunks.append(chunk)
        return b"".join(chunks), False

    async def log(stream: asyncio.StreamReader) -> bytes:
        # Diagnostics only: keep the last ``limit`` bytes, where the cause usually is.
        kept = bytearray()
        while chunk := await stream.read(65536):
            kept += chunk
            del kept[:-limit]
        return bytes(kept)

    _, (out, over), err = await asyncio.gather(feed(), reply(process.stdout), log(process.stderr))
    return out, err, over


async def _drain(stream: asyncio.StreamReader) -> None:
    while await stream.read(65536):
        pass


async def _reap(process: asyncio.subprocess.Process) -> None:
    """After the group is killed: read the pipes to EOF so the process can be waited for.

    Unread output pauses a pipe, and asyncio only reports the exit once every pipe
    has closed; a descendant that left the group may hold them open, so the wait is
    bounded and then abandoned rather than stalling the Host.
    """
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        process.stdin.close()
    try:
        await asyncio.wait_for(
            asyncio.gather(_drain(process.stdout), _drain(process.stderr), process.wait()),
            timeout=_REAP_GRACE_S,
        )
    except TimeoutError:
        # Abandoned: close the transport now, or its finalizer runs after the loop
        # has closed and prints a traceback about it.
        transport = getattr(process, "_transport", None)
        if transport is not None:
            transport.close()


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def _end_turn(process: asyncio.subprocess.Process) -> None:
    """Stop a turn early: the shim kills the whole tree; the group is killed if it cannot."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(process.pid, signal.SIGTERM)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(process.wait()), timeout=_TERM_GRACE_S)
    _kill_group(process)
    await _reap(process)


def _not_executable(program: str, path: str | None, cwd: str | None) -> str:
    """Why ``program`` cannot be started ('' if it can): checked before the shim forks."""
    if "/" in program:
        where = os.path.join(cwd or os.getcwd(), program)
        if not os.path.exists(where):
            return f"{program}: No such file or directory"
        if os.path.isdir(where) or not os.access(where, os.X_OK):
            return f"{program}: Permission denied"
        return ""
    if shutil.which(program, path=path) is None:
        return f"{program}: No such file or directory"
    return ""


def _classify(code: int, stdout: bytes, stderr: bytes) -> InvocationResult:
    tail = stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
    if code == _SHIM_START_FAILED and tail[0].startswith(_SHIM_MARKER):
        return Failed(
            reason="start-failed",
            code=ErrorCode.EXECUTOR_START_FAILED,
            detail=tail[0][len(_SHIM_MARKER) + 2 :][:300],
        )
    try:
        reply = json.loads(stdout.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        # ValueError covers JSONDecodeError and integers of more than 4300 digits.
        reply = None
    if code < 0:
        return Failed(
            reason="abrupt-termination",
            code=ErrorCode.EXECUTOR_ABRUPT_TERMINATION,
            retryable=True,
            detail=f"killed by signal {-code}; {tail[0]}"[:300],
        )
    if not isinstance(reply, dict):
        what = "no reply" if not stdout.strip() else "not exactly one JSON object"
        return Failed(
            reason="protocol-error",
            code=ErrorCode.EXECUTOR_PROTOCOL_ERROR,
            detail=f"{what} on stdout (exit {code}); {tail[0]}"[:300],
        )
    result = parse_result(reply)
    if code != 0 and not isinstance(result, Failed):
        return Failed(
            reason="protocol-error",
            code=ErrorCode.EXECUTOR_PROTOCOL_ERROR,
            detail=f"exit status {code} with a non-failure reply; {tail[0]}"[:300],
        )
    return result
