#!/usr/bin/env python3
"""A deterministic "coding agent" for tests and demos: edits files by a script.

Usage: ``scripted_editor.py SCRIPT.json PROMPT_FILE``. The script is a list of
steps, one per turn of the goal (generation N uses step N; the last repeats).
A step is ``{"ask": "question"}`` (written to ``$EXECSYS_QUESTION_FILE``
unless the prompt already holds an answer) and/or ``{"replace": [[path, old,
new], ...]}`` (text replacements in the current directory; one already made is
skipped). With ``"edit_first": true`` the replacements are made before the
question is asked. Turns that edited are counted in ``SCRIPT.count`` beside the
script, so step N is generation N's. Every prompt received is kept as
``SCRIPT.prompt-K`` (K counts turns), for a test to read.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main() -> int:
    """Apply this turn's step."""
    script = json.loads(Path(sys.argv[1]).read_text())
    prompt = Path(sys.argv[2]).read_text()
    counter = Path(sys.argv[1]).with_suffix(".count")
    generation = 1 + (int(counter.read_text()) if counter.exists() else 0)
    step = script[min(generation, len(script)) - 1]
    turns = len(list(counter.parent.glob(counter.stem + ".prompt-*")))
    counter.with_suffix(f".prompt-{turns + 1}").write_text(prompt)
    answered = "## Answer to your question" in prompt
    asking = bool(step.get("ask")) and not answered
    if asking and not step.get("edit_first"):
        Path(os.environ["EXECSYS_QUESTION_FILE"]).write_text(step["ask"])
        return 0
    for path, old, new in step.get("replace", []):
        target = Path(path)
        text = target.read_text()
        if old not in text and new in text:
            continue  # made on an earlier turn (before a question)
        if old not in text:
            print(f"cannot find {old!r} in {path}", file=sys.stderr)
            return 3
        target.write_text(text.replace(old, new, 1))
    if asking:
        Path(os.environ["EXECSYS_QUESTION_FILE"]).write_text(step["ask"])
        return 0
    counter.write_text(str(generation))
    print(f"generation {generation}: {len(step.get('replace', []))} edit(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
