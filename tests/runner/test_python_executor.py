"""Python and scripted executors: the same replies and classifications as commands."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from contracts import (
    Completed,
    ErrorCode,
    Failed,
    InvocationRequest,
    NeedsInput,
    PythonBinding,
    ScriptedBinding,
)
from runner import Executors, parse_result

AGENTS = Path(__file__).parent / "agents"
REQUEST = InvocationRequest(
    delivery="d-0123",
    node="plan",
    activation=1,
    invocation="i-7",
    attempt=1,
    input={"ticket": "T-9"},
)


def _invoke(
    binding: PythonBinding | ScriptedBinding,
    request: InvocationRequest = REQUEST,
    executors: Executors | None = None,
) -> Any:
    invoker = executors or Executors(AGENTS)
    return asyncio.run(invoker(request, binding, capability="cap", workspace=None))


def _py(function: str, **kw: Any) -> PythonBinding:
    return PythonBinding(python=f"execsys_pyagents:{function}", path=str(AGENTS), **kw)


def _failed(result: object, code: ErrorCode) -> Failed:
    assert isinstance(result, Failed), result
    assert result.code is code, result
    return result


# -- python executors ---------------------------------------------------------------


def test_an_async_callable_returning_a_dict_completes_and_gets_the_typed_request() -> None:
    result = _invoke(_py("completed_dict"))
    assert result == Completed(output={"ticket": "T-9"})
    import execsys_pyagents  # type: ignore[import-not-found]

    assert execsys_pyagents.CALLS == [REQUEST]


def test_an_async_callable_returning_a_model_completes() -> None:
    assert _invoke(_py("completed_model")) == Completed(output={"turn": 1, "node": "plan"})


def test_needs_input_then_the_answer_in_the_next_turn() -> None:
    assert _invoke(_py("needs_input")) == NeedsInput(question="which?", session="py-s")
    answer = REQUEST.model_copy(update={"turn": 2, "session": "py-s", "response": 5})
    assert _invoke(_py("needs_input"), answer) == Completed(output={"answer": 5})


def test_a_failed_model_keeps_retryable_and_the_code_is_normalized() -> None:
    result = _failed(_invoke(_py("failed_model")), ErrorCode.NODE_FAILED)
    assert (result.reason, result.retryable) == ("no-capacity", True)


def test_raising_is_executor_raised() -> None:
    result = _failed(_invoke(_py("raises")), ErrorCode.EXECUTOR_RAISED)
    assert result.retryable is False
    assert "RuntimeError: boom in executor" in result.detail


def test_a_plain_function_is_refused_as_raised() -> None:
    _failed(_invoke(_py("not_async")), ErrorCode.EXECUTOR_RAISED)


def test_the_deadline_is_executor_timeout() -> None:
    started = time.monotonic()
    result = _failed(_invoke(_py("sleeps", timeout_s=0.2)), ErrorCode.EXECUTOR_TIMEOUT)
    assert result.retryable is True
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    ("target", "path", "fragment"),
    [
        ("execsys_no_such_module:run", str(AGENTS), "ModuleNotFoundError"),
        ("execsys_pyagents:no_such_function", str(AGENTS), "AttributeError"),
        ("execsys_pyagents:NOT_CALLABLE", str(AGENTS), "not callable"),
        ("execsys_broken_agent:run", str(AGENTS), "not installed"),
        ("execsys_pyagents:completed_dict", "/nonexistent-folder", "ModuleNotFoundError"),
    ],
)
def test_an_import_failure_is_executor_import_failed(target: str, path: str, fragment: str) -> None:
    result = _failed(
        _invoke(PythonBinding(python=target, path=path)), ErrorCode.EXECUTOR_IMPORT_FAILED
    )
    assert fragment in result.detail


def test_without_a_path_the_module_is_imported_from_the_executors_folder() -> None:
    binding = PythonBinding(python="execsys_pyagents:completed_model")
    assert _invoke(binding, executors=Executors(AGENTS)) == Completed(
        output={"turn": 1, "node": "plan"}
    )


@pytest.mark.parametrize("function", ["malformed", "not_a_dict", "nan_output", "set_output"])
def test_a_malformed_reply_is_a_protocol_error(function: str) -> None:
    result = _failed(_invoke(_py(function)), ErrorCode.EXECUTOR_PROTOCOL_ERROR)
    assert result.retryable is False


# -- scripted executors -------------------------------------------------------------

SCRIPT = ScriptedBinding(
    scripted=(
        {"status": "completed", "output": {"n": 0}},
        {"status": "completed", "output": {"n": 1}},
        {"status": "completed", "output": {"n": 2}},
    )
)


@pytest.mark.parametrize(
    ("activation", "attempt", "turn", "n"),
    [
        (1, 1, 1, 0),
        (2, 1, 1, 1),
        (1, 2, 1, 1),
        (1, 1, 2, 1),
        (2, 2, 1, 2),
        (1, 2, 2, 2),
        (3, 1, 1, 2),
        (5, 4, 3, 2),  # past the end: the last reply repeats
    ],
)
def test_a_scripted_reply_is_chosen_by_activation_attempt_and_turn(
    activation: int, attempt: int, turn: int, n: int
) -> None:
    request = REQUEST.model_copy(
        update={"activation": activation, "attempt": attempt, "turn": turn}
    )
    assert _invoke(SCRIPT, request) == Completed(output={"n": n})


def test_scripted_replies_are_classified_like_any_other() -> None:
    binding = ScriptedBinding(
        scripted=(
            {"status": "failed", "reason": "flaky", "retryable": True, "code": "EXECUTOR_TIMEOUT"},
            {"status": "finished"},
        )
    )
    first = _failed(_invoke(binding), ErrorCode.NODE_FAILED)
    assert (first.reason, first.retryable) == ("flaky", True)
    second = REQUEST.model_copy(update={"attempt": 2})
    _failed(_invoke(binding, second), ErrorCode.EXECUTOR_PROTOCOL_ERROR)


# -- parse_result ---------------------------------------------------------------------


def test_parse_result_names_where_a_reply_is_malformed() -> None:
    result = _failed(
        parse_result({"status": "needs-input", "question": "?"}), ErrorCode.EXECUTOR_PROTOCOL_ERROR
    )
    assert "session" in result.detail
