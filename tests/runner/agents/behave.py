"""Command executor whose (mis)behaviour is chosen by its first argument.

Each mode is one way an executor can answer, or fail to answer, a turn; the
tests in ``test_command_executor.py`` name them.
"""

import json
import os
import signal
import sys
import time


def reply(value: object) -> None:
    sys.stdout.write(json.dumps(value))
    sys.stdout.flush()


mode = sys.argv[1]
if mode not in {"ignore-stdin", "close-stdin"}:
    request = json.load(sys.stdin)

if mode == "needs-input":
    if request["turn"] == 1:
        reply({"status": "needs-input", "question": {"ask": "which?"}, "session": "s-1"})
    else:
        reply(
            {
                "status": "completed",
                "output": {"session": request["session"], "answer": request["response"]},
            }
        )
elif mode == "failed":
    reply(
        {
            "status": "failed",
            "reason": "tests-red",
            "retryable": True,
            "code": "EXECUTOR_TIMEOUT",
            "detail": "3 tests failed",
        }
    )
elif mode == "silent":
    pass
elif mode == "not-json":
    print("done, all good")
elif mode == "two-objects":
    reply({"status": "completed", "output": {}})
    print()
    reply({"status": "completed", "output": {}})
elif mode == "array":
    reply([{"status": "completed", "output": {}}])
elif mode == "unknown-status":
    reply({"status": "done", "output": {}})
elif mode == "extra-keys":
    reply({"status": "completed", "output": {}, "confidence": 0.9})
elif mode == "nan":
    sys.stdout.write('{"status": "completed", "output": {"score": NaN}}')
elif mode == "big-stdout":
    reply({"status": "completed", "output": {"blob": "x" * int(sys.argv[2])}})
elif mode == "flood-stdout":
    # Keeps writing: only the Host's kill at the output bound stops it.
    while True:
        sys.stdout.write("x" * 65536)
elif mode == "big-stderr":
    sys.stderr.write(("log line\n" * (int(sys.argv[2]) // 9)) + "last words\n")
    sys.stderr.flush()
    reply({"status": "completed", "output": {"ok": True}})
elif mode == "exit-completed":
    reply({"status": "completed", "output": {}})
    sys.exit(3)
elif mode == "exit-failed":
    reply({"status": "failed", "reason": "lint-errors"})
    sys.exit(2)
elif mode == "exit-silent":
    print("fatal: something broke", file=sys.stderr)
    sys.exit(1)
elif mode == "sigkill":
    reply({"status": "completed", "output": {}})
    os.kill(os.getpid(), signal.SIGKILL)
elif mode == "ignore-stdin":
    # Never reads stdin, and talks a lot on stderr before answering.
    sys.stderr.write("e" * int(sys.argv[2]))
    sys.stderr.flush()
    reply({"status": "completed", "output": {"ignored": True}})
elif mode == "close-stdin":
    os.close(0)
    time.sleep(0.2)
    reply({"status": "completed", "output": {"closed": True}})
else:
    raise SystemExit(f"unknown mode {mode}")
