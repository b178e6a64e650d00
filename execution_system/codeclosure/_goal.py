"""Goals: the objective, its acceptance criteria and checks, and their versioned record.

A goal is created once (``goal create``) and then only moved by versioned
commands (``start``, ``resume``, ``cancel``): each names the version it
expects, and a stale one is refused before anything else is looked at.
"""

from __future__ import annotations

import json
import re
import shutil
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from contracts import ErrorCode, digest_of, error, validation_message
from execution_system.codeclosure._python import check_sees_candidate, discover
from host import GoalTable

_NAME = r"^[A-Za-z0-9_-]{1,40}$"

#: What a worker may never change by default: the tests and everything that decides
#: which tests run and how (collection, configuration, CI). ``--protect`` adds to it.
DEFAULT_PROTECTED: tuple[str, ...] = (
    "tests",
    "test",
    "**/conftest.py",
    "**/test_*.py",
    "**/*_test.py",
    "pytest.ini",
    "pyproject.toml",
    "setup.cfg",
    "tox.ini",
    "noxfile.py",
    ".github",
    ".gitlab-ci.yml",
    ".circleci",
    ".travis.yml",
    "azure-pipelines.yml",
    "Jenkinsfile",
)


#: The default check's arguments after the project's interpreter.
DEFAULT_PYTEST: tuple[str, ...] = ("-m", "pytest", "-q", "-p", "no:cacheprovider")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CommandWorker(_Frozen):
    """A CLI coding agent run in the candidate workspace (the executor protocol)."""

    kind: Literal["command"] = "command"
    """Discriminator."""
    argv: tuple[str, ...] = Field(min_length=1)
    """The agent's command line."""
    timeout_s: float = Field(default=1800.0, gt=0)
    """Deadline per turn."""


class PatchWorker(_Frozen):
    """Applies one patch file per candidate generation (demos and tests)."""

    kind: Literal["patches"] = "patches"
    """Discriminator."""
    patches: tuple[str, ...] = Field(min_length=1)
    """Unified diffs (absolute paths); generation N applies the Nth (the last repeats)."""
    ask: str | None = None
    """If set, the worker first asks this question (an action-input) and records the answer."""


class AgentWorker(_Frozen):
    """Any CLI coding agent, run through the generic adapter (``--agent-command``)."""

    kind: Literal["agent"] = "agent"
    """Discriminator."""
    argv: tuple[str, ...] = Field(min_length=1)
    """The agent's command line; ``{prompt_file}`` is replaced by the prompt's path."""
    timeout_s: float = Field(default=1800.0, gt=0)
    """Deadline per turn."""


Worker = Annotated[CommandWorker | PatchWorker | AgentWorker, Field(discriminator="kind")]


class Goal(_Frozen):
    """One engineering goal and how its result is judged."""

    id: str
    """Goal id (``g-`` + 12 hex)."""
    revision: int = 1
    """Goal revision (revising a goal is out of scope here: always 1)."""
    objective: str = Field(min_length=1, max_length=4000)
    """What should be true when the goal is closed."""
    project: str
    """Absolute path of the project the candidate is made from (copied, never edited)."""
    criteria: tuple[Annotated[str, Field(min_length=1)], ...] = Field(min_length=1)
    """Acceptance criteria, for people and the plan."""
    checks: dict[Annotated[str, Field(pattern=_NAME)], tuple[str, ...]] = Field(min_length=1)
    """Check name -> argv, run against the frozen candidate."""
    required: tuple[str, ...]
    """Checks whose failure rejects the candidate (the others ask for a decision)."""
    protected: tuple[str, ...] = DEFAULT_PROTECTED
    """Paths and patterns the implementation may not change (acceptance-critical)."""
    python: str | None = None
    """The project's interpreter (absolute), when one was given or discovered."""
    allow_fewer: tuple[str, ...] = ()
    """Checks allowed to select fewer tests than the base did (the plan says so)."""
    exclude: tuple[str, ...] = ()
    """Folder names left out of the candidate, its snapshots and digests, besides the
    defaults (``.git``, virtual environments, caches): ``goal create --exclude``."""
    max_generations: int = Field(default=3, ge=1, le=20)
    """How many candidate generations repairs may create."""
    worker: Worker
    """Who implements."""

    @field_validator("exclude")
    @classmethod
    def _folder_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            if name in {"", ".", ".."} or len(name) > 255 or any(c in name for c in "/,\x00"):
                raise ValueError(f"{name[:40]!r} is not one folder name (no '/', ',', '.' or '..')")
        return names

    def spec_digest(self, check: str) -> str:
        """The digest that binds evidence to this exact check specification."""
        return digest_of({"check": check, "argv": list(self.checks[check])})


def parse_check(text: str) -> tuple[str, tuple[str, ...]]:
    """``NAME=CMD`` -> (name, argv); CMD is split like a shell would, never run by one."""
    import shlex

    name, sep, command = text.partition("=")
    if not sep or not re.match(_NAME, name) or not command.strip():
        raise error(
            ErrorCode.GOAL_INVALID,
            f"check {text!r} is not NAME=COMMAND",
            path="--check",
            expected="e.g. tests='python -m pytest -q'",
        )
    return name, tuple(shlex.split(command))


def new_goal(
    *,
    objective: str,
    project: str,
    criteria: list[str],
    checks: dict[str, tuple[str, ...]],
    required: list[str] | None,
    protected: list[str] | None,
    max_generations: int,
    worker: CommandWorker | PatchWorker | AgentWorker,
    python: str | None = None,
    allow_fewer: list[str] | None = None,
    exclude: list[str] | None = None,
) -> Goal:
    """Validate everything a goal needs before anything is stored.

    Without checks, the goal gets one: ``tests`` = the project's Python
    ``-m pytest``. A check whose first word is a bare ``python``/``python3``
    runs under the project's Python too. Each check that can be questioned is
    asked where it would import the project from (``CHECK_NOT_CANDIDATE``).
    Files a check names (``tests/run.py``) join the protected paths.
    """
    if not [c for c in criteria if c.strip()]:
        raise error(
            ErrorCode.GOAL_INVALID,
            "a goal needs at least one acceptance criterion",
            path="--criterion",
            expected="--criterion TEXT (one or more)",
        )
    folder = Path(project)
    if not folder.is_dir():
        raise error(
            ErrorCode.GOAL_INVALID,
            "the project folder does not exist",
            path=str(project),
            expected="an existing directory",
        )
    checks, interpreter = _resolve_checks(folder, dict(checks), python)
    for name, argv in checks.items():
        program = argv[0]
        found = shutil.which(program) or (folder / program).is_file()
        if not found:
            raise error(
                ErrorCode.CHECK_CANNOT_START,
                f"check '{name}' cannot start: "
                f"'{program}' is not an executable on PATH or in the project",
                path=f"--check {name}",
                expected="an existing program",
            )
        check_sees_candidate(name, argv, folder.resolve())
    guarded = list(protected if protected is not None else DEFAULT_PROTECTED)
    guarded += [p for p in _check_inputs(folder, checks) if p not in guarded]
    unknown_allowed = [c for c in allow_fewer or [] if c not in checks]
    if unknown_allowed:
        raise error(
            ErrorCode.GOAL_INVALID,
            f"{unknown_allowed[0]!r} is not a check",
            path="--allow-fewer-tests",
            expected="one of " + ", ".join(checks),
        )
    chosen = list(required) if required else list(checks)
    unknown = [r for r in chosen if r not in checks]
    if unknown:
        raise error(
            ErrorCode.GOAL_INVALID,
            f"required check {unknown[0]!r} is not a check",
            path="--required",
            expected="one of " + ", ".join(checks),
        )
    if isinstance(worker, AgentWorker) and not (
        shutil.which(worker.argv[0]) or Path(worker.argv[0]).is_file()
    ):
        raise error(
            ErrorCode.GOAL_INVALID,
            "the agent command is not an executable on PATH or a file",
            path="--agent-command",
            expected="e.g. 'examples/agents/cli_agent.sh {prompt_file}'",
        )
    if isinstance(worker, PatchWorker):
        for patch in worker.patches:
            if not Path(patch).is_file():
                raise error(ErrorCode.GOAL_INVALID, "patch file does not exist", path=patch)
    try:
        return Goal(
            id="g-" + uuid.uuid4().hex[:12],
            objective=objective,
            project=str(folder.resolve()),
            criteria=tuple(c for c in criteria if c.strip()),
            checks={k: tuple(v) for k, v in checks.items()},
            required=tuple(chosen),
            protected=tuple(guarded),
            max_generations=max_generations,
            worker=worker,
            python=interpreter,
            allow_fewer=tuple(allow_fewer or ()),
            exclude=tuple(dict.fromkeys(exclude or ())),
        )
    except ValidationError as exc:
        # e.g. an empty objective or max_generations out of range: a coded refusal.
        first = exc.errors(include_url=False)[0]
        raise error(
            ErrorCode.GOAL_INVALID,
            validation_message(first["msg"]),
            path=".".join(str(part) for part in first["loc"]),
        ) from None


def _resolve_checks(
    folder: Path, checks: dict[str, tuple[str, ...]], python: str | None
) -> tuple[dict[str, tuple[str, ...]], str | None]:
    """Fill in the default check and the project's Python where a check asks for it."""
    bare = [name for name, argv in checks.items() if argv and _is_bare_python(argv[0])]
    interpreter = None
    if python is not None or not checks or bare:
        interpreter = discover(folder, python)
    if not checks:
        assert interpreter is not None
        return {"tests": (interpreter, *DEFAULT_PYTEST)}, interpreter
    resolved = {
        name: ((interpreter, *argv[1:]) if name in bare and interpreter else argv)
        for name, argv in checks.items()
    }
    return resolved, interpreter


def _is_bare_python(word: str) -> bool:
    return "/" not in word and re.match(r"^python(\d+(\.\d+)*)?$", word) is not None


def _check_inputs(folder: Path, checks: dict[str, tuple[str, ...]]) -> list[str]:
    """Project files a check's command line names: part of what judges the candidate."""
    named: list[str] = []
    root = folder.resolve()
    for argv in checks.values():
        for word in argv:
            if word.startswith("-") or "\n" in word:
                continue
            path = (folder / word).resolve()
            if path != root and path.is_relative_to(root) and path.is_file():
                rel = path.relative_to(root).as_posix()
                if rel not in named:
                    named.append(rel)
    return named


class GoalStore:
    """Goals on the Host's store, through its goal table (any backend).

    Adds what goals mean to the Host's plain rows: the goal document, the
    READY state a new goal starts in, and the coded refusals (no such goal, a
    stale version).
    """

    def __init__(self, table: GoalTable) -> None:
        self.table = table

    def insert(self, goal: Goal) -> dict[str, Any]:
        """Store a new goal at version 1 (one transaction: nothing half-created)."""
        self.table.insert(goal.id, goal.model_dump_json().encode(), "READY")
        return self.get(goal.id)

    def get(self, goal_id: str) -> dict[str, Any]:
        """The goal's row: goal, version, delivery, state."""
        row = self.table.get(goal_id)
        if row is None:
            raise error(
                ErrorCode.GOAL_NOT_FOUND,
                "no such goal",
                path=goal_id,
                expected="a goal id printed by 'execsys goal create'",
            )
        return {
            "goal": Goal.model_validate_json(row["document"]),
            "notes": self.notes(goal_id),
            "id": row["goal"],
            "version": row["version"],
            "delivery": row["delivery"],
            "state": row["state"],
            "created": row["created"],
            "updated": row["updated"],
        }

    def advance(
        self, goal_id: str, expected: int, *, state: str, delivery: str | None = None
    ) -> dict[str, Any]:
        """Compare-and-set: move to ``state`` only if the version is still ``expected``."""
        if not self.table.advance(goal_id, expected, state=state, delivery=delivery):
            current = self.get(goal_id)
            raise error(
                ErrorCode.GOAL_STALE_VERSION,
                f"the goal is at version {current['version']}",
                path=goal_id,
                expected=f"--expected-version {current['version']}",
            )
        return self.get(goal_id)

    def note(self, goal_id: str, text: str) -> None:
        """Record why something about the goal failed outside its delivery's journal."""
        self.table.note(goal_id, text)

    def notes(self, goal_id: str) -> list[str]:
        """The goal's notes, oldest first."""
        return self.table.notes(goal_id)

    def check_version(self, goal_id: str, expected: int) -> dict[str, Any]:
        """Refuse a stale command before looking at anything else."""
        current = self.get(goal_id)
        if current["version"] != expected:
            raise error(
                ErrorCode.GOAL_STALE_VERSION,
                f"the goal is at version {current['version']}",
                path=goal_id,
                expected=f"--expected-version {current['version']}",
            )
        return current

    def list(self) -> list[dict[str, Any]]:
        """Every goal, newest first."""
        return [
            {
                "goal": row["goal"],
                "version": row["version"],
                "state": row["state"],
                "delivery": row["delivery"],
                "objective": json.loads(row["document"])["objective"],
            }
            for row in self.table.rows()
        ]
