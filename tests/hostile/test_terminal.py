"""Text from executors, operators and stores cannot forge lines on an operator's terminal."""

from __future__ import annotations

import json
from pathlib import Path

from execution_system.cli._output import terminal_safe
from tests.hostile.helpers import execsys, one_action, write

EVIL = "bad\x1b[31mRED\r\nexecsys: FORGED\x00\x9b2J\u202eevil\u2028x"
RAW = ["\x1b", "\r", "\x00", "\x9b", "\u202e", "\u2028"]
#: What a command line can carry (no NUL).
EVIL_ARG = EVIL.replace("\x00", "")


def _clean(text: str) -> None:
    for char in RAW:
        assert char not in text, (char, text)
    for line in text.splitlines():
        assert not line.startswith("execsys: FORGED"), text


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def test_terminal_safe_escapes_every_control_and_keeps_the_rest() -> None:
    assert terminal_safe("plain text: é ✓ 'quoted' \\ ok") == "plain text: é ✓ 'quoted' \\ ok"
    assert terminal_safe(EVIL) == (
        "bad\\x1b[31mRED\\r\\nexecsys: FORGED\\x00\\x9b2J\\u202eevil\\u2028x"
    )
    assert terminal_safe("a\tb\x7f") == "a\\tb\\x7f"


def test_an_executor_failure_reason_and_detail_are_escaped_in_text_and_exact_in_json(
    tmp_path: Path,
) -> None:
    one_action(
        tmp_path,
        reply={"status": "failed", "reason": EVIL[:40], "retryable": False, "detail": EVIL},
    )
    text = execsys("run", "spec.yaml", "--store", "sqlite:///s.db", cwd=tmp_path)
    assert text.code == 1
    _clean(text.out + text.err)
    assert "bad\\x1b[31mRED\\r\\nexecsys: FORGED" in text.out
    as_json = execsys("run", "spec.yaml", "--store", "sqlite:///s.db", "--json", cwd=tmp_path)
    assert EVIL in as_json.json()["message"]  # --json keeps the exact text
    delivery = as_json.json()["delivery"]
    exported = execsys("journal", "export", delivery, "--store", "sqlite:///s.db", cwd=tmp_path)
    # The journal keeps the exact text (split on '\n' only: U+2028 is inside a line).
    texts = [
        text for line in exported.out.split("\n") if line for text in _strings(json.loads(line))
    ]
    assert any(EVIL in text for text in texts)


def test_an_executor_question_is_escaped_in_run_status_and_inspect(tmp_path: Path) -> None:
    one_action(tmp_path, reply={"status": "needs-input", "question": EVIL, "session": "s"})
    started = execsys("run", "spec.yaml", "--store", "sqlite:///s.db", "--json", cwd=tmp_path)
    assert started.json()["suspension"]["question"] == EVIL
    delivery = started.json()["delivery"]
    for command in (["status", delivery], ["inspect", delivery]):
        shown = execsys(*command, "--store", "sqlite:///s.db", cwd=tmp_path)
        assert shown.code == 0, shown.err
        _clean(shown.out)
        assert "FORGED" in shown.out  # shown, as escaped text


def test_an_operator_actor_and_reason_are_escaped(tmp_path: Path) -> None:
    write(
        tmp_path,
        "spec.yaml",
        """\
        spec: execution-system/v1
        graph: hostile-operator
        input: {type: object}
        start: w
        nodes:
          w:
            kind: wait
            wait: decision
            result: {type: object}
            authority: {roles: [r], min_count: 1}
            next: done
          done: {kind: terminal, outcome: succeeded}
        """,
    )
    write(tmp_path, "authority.yaml", "actors: {al: [r]}\napprover: al\n")
    store = ("--store", "sqlite:///s.db")
    started = execsys(
        "run", "spec.yaml", "--authority", "authority.yaml", *store, "--json", cwd=tmp_path
    )
    delivery = started.json()["delivery"]
    stopped = execsys("stop", delivery, "--actor", EVIL_ARG, *store, cwd=tmp_path)
    _clean(stopped.out + stopped.err)
    recovered = execsys(
        "recover",
        delivery,
        "--directive",
        "continue",
        "--actor",
        EVIL_ARG,
        "--reason",
        EVIL_ARG,
        *store,
        cwd=tmp_path,
    )
    _clean(recovered.out + recovered.err)
    for command in (["status"], ["status", delivery], ["inspect", delivery]):
        shown = execsys(*command, *store, cwd=tmp_path)
        _clean(shown.out + shown.err)


def test_an_error_naming_hostile_text_stays_one_line(tmp_path: Path) -> None:
    one_action(tmp_path)
    execsys("run", "spec.yaml", "--store", "sqlite:///s.db", cwd=tmp_path)
    done = execsys("inspect", EVIL_ARG, "--store", "sqlite:///s.db", cwd=tmp_path)
    assert done.code == 1
    _clean(done.err)
    assert done.line.startswith("execsys: DELIVERY_NOT_FOUND at bad\\x1b[31mRED")


def test_plain_output_is_unchanged(tmp_path: Path) -> None:
    one_action(tmp_path)
    done = execsys("run", "spec.yaml", "--store", "sqlite:///s.db", cwd=tmp_path)
    assert done.out.splitlines()[1] == "  reached terminal 'done'"
