"""Command executors: real processes under the protocol of docs/executors.md."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import stat
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from contracts import CommandBinding, Completed, ErrorCode, Failed, InvocationRequest, NeedsInput
from runner import Executors, run_command

T = TypeVar("T")
AGENTS = Path(__file__).parent / "agents"
CAPABILITY = "cap.v1.test-token"
REQUEST = InvocationRequest(
    delivery="d-0123",
    node="plan",
    activation=2,
    invocation="i-42",
    attempt=3,
    input={"ticket": "T-1", "labels": ["a", "b"]},
)


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def _binding(*argv: str, **kw: Any) -> CommandBinding:
    return CommandBinding(command=argv, **kw)


def _agent(name: str, *args: str, **kw: Any) -> CommandBinding:
    return _binding(sys.executable, str(AGENTS / name), *args, **kw)


def _behave(mode: str, *args: str, **kw: Any) -> CommandBinding:
    return _agent("behave.py", mode, *args, **kw)


def _invoke(
    binding: CommandBinding,
    workspace: Path | None,
    request: InvocationRequest = REQUEST,
) -> Any:
    return _run(
        Executors(AGENTS)(
            request, binding, capability=CAPABILITY, workspace=str(workspace) if workspace else None
        )
    )


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


def _protocol_error(result: object) -> Failed:
    assert isinstance(result, Failed), result
    assert result.code is ErrorCode.EXECUTOR_PROTOCOL_ERROR, result
    assert result.retryable is False
    return result


def _gone(pid: int) -> bool:
    """The process no longer runs (absent, or a zombie waiting for its reaper)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return True
    return fields[0] in {"Z", "X"}


def _eventually_gone(pids: list[int], within: float = 2.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if all(_gone(pid) for pid in pids):
            return True
        time.sleep(0.02)
    return False


# -- well-behaved replies ---------------------------------------------------------


def test_a_completed_reply_is_the_result(workspace: Path) -> None:
    result = _invoke(_agent("echo.py"), workspace)
    assert isinstance(result, Completed)
    assert result.output["request"]["node"] == "plan"


def test_needs_input_carries_the_session_and_the_next_turn_continues_it(workspace: Path) -> None:
    asked = _invoke(_behave("needs-input"), workspace)
    assert asked == NeedsInput(question={"ask": "which?"}, session="s-1")
    answer = REQUEST.model_copy(update={"turn": 2, "session": "s-1", "response": "left"})
    done = _invoke(_behave("needs-input"), workspace, answer)
    assert done == Completed(output={"session": "s-1", "answer": "left"})


def test_a_failed_reply_keeps_reason_and_retryable_but_the_code_is_the_hosts(
    workspace: Path,
) -> None:
    result = _invoke(_behave("failed"), workspace)
    assert isinstance(result, Failed)
    assert (result.reason, result.retryable, result.detail) == ("tests-red", True, "3 tests failed")
    assert result.code is ErrorCode.NODE_FAILED  # the executor claimed EXECUTOR_TIMEOUT


def test_a_nonzero_exit_with_a_failed_reply_is_that_failure(workspace: Path) -> None:
    result = _invoke(_behave("exit-failed"), workspace)
    assert result == Failed(reason="lint-errors", code=ErrorCode.NODE_FAILED)


# -- what the executor is given -----------------------------------------------------


def test_stdin_is_exactly_the_documented_request(workspace: Path) -> None:
    request = REQUEST.model_copy(update={"turn": 2, "session": "opaque", "response": {"a": 1}})
    result = _invoke(_agent("echo.py"), workspace, request)
    assert isinstance(result, Completed)
    assert json.loads(result.output["raw"]) == {
        "protocol": "execution-system/v1",
        "delivery": "d-0123",
        "node": "plan",
        "activation": 2,
        "invocation": "i-42",
        "attempt": 3,
        "turn": 2,
        "input": {"ticket": "T-1", "labels": ["a", "b"]},
        "session": "opaque",
        "response": {"a": 1},
    }
    assert result.output["raw"].count("\n") == 0, "one JSON object, then EOF"


def test_a_first_turn_has_null_session_and_response(workspace: Path) -> None:
    result = _invoke(_agent("echo.py"), workspace)
    assert isinstance(result, Completed)
    sent = result.output["request"]
    assert (sent["turn"], sent["session"], sent["response"]) == (1, None, None)


def test_cwd_is_the_workspace_and_the_protocol_variables_are_set(workspace: Path) -> None:
    binding = _agent("echo.py", env={"EXECSYS_TEST_EXTRA": "yes", "EXECSYS_CAPABILITY": "forged"})
    result = _invoke(binding, workspace)
    assert isinstance(result, Completed)
    assert Path(result.output["cwd"]) == workspace.resolve()
    assert result.output["workspace"] == str(workspace)
    assert result.output["capability"] == CAPABILITY, "binding env cannot replace the capability"
    assert result.output["extra"] == "yes"


def test_without_a_workspace_the_hosts_cwd_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EXECSYS_WORKSPACE", raising=False)
    result = _invoke(_agent("echo.py"), None)
    assert isinstance(result, Completed)
    assert (result.output["cwd"], result.output["workspace"]) == (os.getcwd(), None)


@pytest.mark.parametrize(
    "argument", ["a; touch pwned", "$(touch pwned)", "`touch pwned`", "*", "x | y", "'q\" \\"]
)
def test_argv_never_goes_through_a_shell(workspace: Path, argument: str) -> None:
    result = _invoke(_agent("echo.py", argument, "two words"), workspace)
    assert isinstance(result, Completed)
    assert result.output["argv"] == [argument, "two words"]
    assert list(workspace.iterdir()) == []


def test_a_relative_program_path_resolves_against_the_executors_folder(workspace: Path) -> None:
    binding = _binding(sys.executable, "agents/echo.py", "plain-arg")
    result = _run(
        Executors(AGENTS.parent)(REQUEST, binding, capability=CAPABILITY, workspace=str(workspace))
    )
    assert isinstance(result, Completed)
    assert result.output["argv"] == ["plain-arg"]


# -- protocol errors ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "fragment"),
    [
        ("silent", "no reply"),
        ("not-json", "not exactly one JSON object"),
        ("two-objects", "not exactly one JSON object"),
        ("array", "not exactly one JSON object"),
        ("unknown-status", "malformed reply"),
        ("extra-keys", "malformed reply"),
        ("exit-completed", "exit status 3"),
        ("exit-silent", "fatal: something broke"),
        ("nan", "not plain JSON"),
    ],
)
def test_a_misbehaving_reply_is_a_protocol_error(workspace: Path, mode: str, fragment: str) -> None:
    result = _protocol_error(_invoke(_behave(mode), workspace))
    assert fragment in result.detail


def test_a_reply_larger_than_the_bound_is_a_protocol_error(workspace: Path) -> None:
    fits = _invoke(_behave("big-stdout", "2000", max_output_bytes=4096), workspace)
    assert isinstance(fits, Completed)
    result = _protocol_error(
        _invoke(_behave("big-stdout", "5000", max_output_bytes=4096), workspace)
    )
    assert "exceeds 4096 bytes" in result.detail


def test_output_past_the_bound_kills_the_process_at_once(workspace: Path) -> None:
    started = time.monotonic()
    result = _invoke(_behave("flood-stdout", max_output_bytes=1024, timeout_s=20), workspace)
    assert time.monotonic() - started < 5, "killed at the bound, not at the deadline"
    assert "exceeds 1024 bytes" in _protocol_error(result).detail


def test_stderr_is_bounded_but_not_a_failure(workspace: Path) -> None:
    result = _invoke(_behave("big-stderr", "300000", max_output_bytes=1024), workspace)
    assert result == Completed(output={"ok": True})


def test_the_last_stderr_line_explains_a_failure_even_past_the_bound(workspace: Path) -> None:
    binding = _binding(
        "/bin/sh",
        "-c",
        "yes log | head -c 200000 >&2; echo 'the real cause' >&2; exit 4",
        max_output_bytes=1024,
    )
    result = _protocol_error(_invoke(binding, workspace))
    assert "the real cause" in result.detail


# -- stdin handling -------------------------------------------------------------------


def test_an_executor_that_closes_stdin_unread_still_answers(workspace: Path) -> None:
    big = REQUEST.model_copy(update={"input": {"blob": "x" * 300_000}})
    result = _invoke(_behave("close-stdin", timeout_s=10), workspace, big)
    assert result == Completed(output={"closed": True})


def test_an_executor_that_never_reads_stdin_and_logs_a_lot_does_not_deadlock(
    workspace: Path,
) -> None:
    big = REQUEST.model_copy(update={"input": {"blob": "x" * 300_000}})
    started = time.monotonic()
    result = _invoke(_behave("ignore-stdin", "300000", timeout_s=10), workspace, big)
    assert result == Completed(output={"ignored": True})
    assert time.monotonic() - started < 5


# -- start failures and abrupt ends ---------------------------------------------------


def test_a_missing_program_is_a_start_failure(workspace: Path) -> None:
    result = _invoke(_binding("/nonexistent/executor-xyz"), workspace)
    assert isinstance(result, Failed)
    assert result.code is ErrorCode.EXECUTOR_START_FAILED
    assert "/nonexistent/executor-xyz" in result.detail


def test_a_non_executable_file_is_a_start_failure(workspace: Path, tmp_path: Path) -> None:
    script = tmp_path / "not-executable.sh"
    script.write_text("#!/bin/sh\necho '{}'\n")
    script.chmod(stat.S_IRUSR | stat.S_IWUSR)
    result = _invoke(_binding(str(script)), workspace)
    assert isinstance(result, Failed)
    assert result.code is ErrorCode.EXECUTOR_START_FAILED


def test_a_missing_workspace_is_a_start_failure(tmp_path: Path) -> None:
    result = _invoke(_agent("echo.py"), tmp_path / "no-such-workspace")
    assert isinstance(result, Failed)
    assert result.code is ErrorCode.EXECUTOR_START_FAILED


def test_killed_by_a_signal_is_abrupt_termination_even_after_a_reply(workspace: Path) -> None:
    result = _invoke(_behave("sigkill"), workspace)
    assert isinstance(result, Failed)
    assert result.code is ErrorCode.EXECUTOR_ABRUPT_TERMINATION
    assert result.retryable is True
    assert "signal 9" in result.detail


# -- deadline and cancellation -----------------------------------------------------------

HANGS_WITH_CHILD = 'echo $$ > "$PIDS"; sleep 100 & echo $! >> "$PIDS"; sleep 100'


def _pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()]


def test_a_hanging_command_is_killed_at_the_deadline(workspace: Path) -> None:
    started = time.monotonic()
    result = _invoke(_binding("sleep", "100", timeout_s=0.5), workspace)
    elapsed = time.monotonic() - started
    assert isinstance(result, Failed)
    assert (result.code, result.retryable) == (ErrorCode.EXECUTOR_TIMEOUT, True)
    assert 0.5 <= elapsed < 0.5 + 1.5


def test_the_deadline_kills_the_whole_process_group(workspace: Path, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    binding = _binding("/bin/sh", "-c", HANGS_WITH_CHILD, timeout_s=0.5, env={"PIDS": str(pids)})
    started = time.monotonic()
    result = _invoke(binding, workspace)
    assert time.monotonic() - started < 0.5 + 1.5, "the grandchild's open pipes do not stall it"
    assert isinstance(result, Failed)
    assert result.code is ErrorCode.EXECUTOR_TIMEOUT
    shell, grandchild = _pids(pids)
    assert _eventually_gone([shell, grandchild])


def test_cancelling_the_turn_kills_the_process_group(workspace: Path, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    binding = _binding("/bin/sh", "-c", HANGS_WITH_CHILD, timeout_s=60, env={"PIDS": str(pids)})

    async def scenario() -> None:
        turn = asyncio.create_task(
            run_command(
                REQUEST, binding, capability=CAPABILITY, workspace=str(workspace), base_dir=AGENTS
            )
        )
        for _ in range(250):
            if pids.exists() and len(pids.read_text().split()) == 2:
                break
            await asyncio.sleep(0.02)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await turn

    started = time.monotonic()
    _run(scenario())
    assert time.monotonic() - started < 5
    assert _eventually_gone(_pids(pids))


def test_a_descendant_that_left_the_group_dies_with_the_turn(
    workspace: Path, tmp_path: Path
) -> None:
    # setsid escapes the group kill and keeps stdout open; the turn's supervisor
    # kills it anyway, so the pipes close and nothing is left to the GC (an
    # unraisable warning from a transport finalizer would fail this test).
    pids = tmp_path / "pids"
    script = 'setsid sleep 100 & echo $! > "$PIDS"; sleep 100'
    binding = _binding("/bin/sh", "-c", script, timeout_s=0.3, env={"PIDS": str(pids)})
    started = time.monotonic()
    try:
        result = _invoke(binding, workspace)
    finally:
        survivors = [pid for pid in _pids(pids) if not _gone(pid)] if pids.exists() else []
        for pid in survivors:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert survivors == []
    assert time.monotonic() - started < 0.3 + 2.5, "no wait for the abandoned pipes"
    assert isinstance(result, Failed)
    assert result.code is ErrorCode.EXECUTOR_TIMEOUT


@pytest.mark.parametrize("ticks", [0, 1, 2, 3, 5, 8])
def test_cancelling_while_the_process_starts_kills_its_group(
    workspace: Path, tmp_path: Path, ticks: int
) -> None:
    # Cancelled inside process creation, asyncio alone kills only the leader and then
    # waits for the pipes the backgrounded child still holds: a 100 s stall.
    pids = tmp_path / "pids"
    binding = _binding("/bin/sh", "-c", HANGS_WITH_CHILD, timeout_s=60, env={"PIDS": str(pids)})

    async def scenario() -> None:
        turn = asyncio.create_task(
            run_command(
                REQUEST, binding, capability=CAPABILITY, workspace=str(workspace), base_dir=AGENTS
            )
        )
        for _ in range(ticks):
            await asyncio.sleep(0)
        turn.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(turn, timeout=10)

    started = time.monotonic()
    _run(scenario())
    assert time.monotonic() - started < 5
    if pids.exists():
        assert _eventually_gone(_pids(pids))
