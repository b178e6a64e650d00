"""The admitted delivery: graph + input + authority policy + executor bindings."""

from __future__ import annotations

from functools import cached_property
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from contracts._canonical import digest_of
from contracts._ids import DeliveryId, Digest
from contracts._spec import ControlGraph

_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}$"


class _Frozen(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid", strict=True)


class AuthorityPolicy(_Frozen):
    """Which actors hold which roles for one delivery; bound by digest at admission."""

    actors: dict[Annotated[str, Field(pattern=_NAME)], tuple[str, ...]] = Field(
        default_factory=dict
    )
    """Actor -> the roles the policy gives that actor."""
    approver: Annotated[str, Field(pattern=_NAME)] | None = None
    """The human who approved this policy."""

    def roles_of(self, actor: str) -> frozenset[str]:
        """The roles the policy gives ``actor`` (empty when unknown)."""
        return frozenset(self.actors.get(actor, ()))


class CommandBinding(_Frozen):
    """An executor started as a process per turn (argv list, never a shell string)."""

    command: tuple[Annotated[str, Field(min_length=1)], ...] = Field(min_length=1)
    """argv; a relative program path resolves against the config file's folder."""
    timeout_s: float = Field(default=300.0, gt=0, le=86_400)
    """Deadline per turn; at the deadline the process group is killed."""
    max_output_bytes: int = Field(default=1_048_576, ge=1024, le=64 * 1_048_576)
    """Bound on the reply read from stdout (and on stderr retained)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the process."""

    @field_validator("command")
    @classmethod
    def _no_nul_in_argv(cls, argv: tuple[str, ...]) -> tuple[str, ...]:
        # The OS cannot pass a NUL inside an argument: refuse here, not at the first turn.
        for i, arg in enumerate(argv):
            if "\x00" in arg:
                raise ValueError(f"argument {i} contains a NUL byte, which no process can receive")
        return argv

    @field_validator("env")
    @classmethod
    def _passable_env(cls, env: dict[str, str]) -> dict[str, str]:
        for name, value in env.items():
            if not name or "=" in name or "\x00" in name or "\x00" in value:
                raise ValueError(
                    f"environment variable {name!r} cannot be passed to a process "
                    "(empty name, '=' in the name, or a NUL byte)"
                )
        return env


class PythonBinding(_Frozen):
    """An executor that is an async callable ``module:function``."""

    python: Annotated[str, Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")]
    """``module:function``; imported with ``path`` (the config file's folder) on sys.path."""
    path: str | None = None
    """Folder put on ``sys.path`` before importing; set at admission to the config's folder."""
    timeout_s: float = Field(default=300.0, gt=0, le=86_400)
    """Deadline per turn."""


class ScriptedBinding(_Frozen):
    """A built-in executor that replays canned replies (demos and tests)."""

    scripted: tuple[dict[str, Any], ...] = Field(min_length=1)
    """Replies returned in order, one per turn; the last one repeats."""


def _binding_kind(value: Any) -> str | None:
    """Which binding a document means, by its one defining key (so errors name that shape)."""
    if isinstance(value, CommandBinding | PythonBinding | ScriptedBinding):
        return type(value).__name__.removesuffix("Binding").lower()
    if isinstance(value, dict):
        return next((key for key in ("command", "python", "scripted") if key in value), None)
    return None


ExecutorBinding = Annotated[
    Annotated[CommandBinding, Tag("command")]
    | Annotated[PythonBinding, Tag("python")]
    | Annotated[ScriptedBinding, Tag("scripted")],
    Discriminator(
        _binding_kind,
        custom_error_type="binding_kind",
        custom_error_message="a binding names one of 'command', 'python' or 'scripted'",
    ),
]
"""How an executor name is implemented."""


class AdmittedDelivery(_Frozen):
    """Everything a Host needs to run one delivery, identified by its digest."""

    graph: ControlGraph
    """The admitted control graph."""
    input: dict[str, Any]
    """The delivery input; valid against ``graph.input``."""
    authority: AuthorityPolicy = Field(default_factory=AuthorityPolicy)
    """The authority policy bound to this delivery."""
    executors: dict[str, ExecutorBinding] = Field(default_factory=dict)
    """Executor name -> binding, for every executor the graph names."""
    nonce: str = ""
    """Distinguishes two otherwise identical deliveries (e.g. a run id); may be empty."""

    @model_validator(mode="after")
    def _json_native(self) -> AdmittedDelivery:
        # Canonicalisation fails on non-JSON values; do it once here so a
        # delivery that exists can always be digested.
        digest_of(self.model_dump(mode="json"))
        return self

    def canonical(self) -> dict[str, Any]:
        """The JSON document whose RFC 8785 bytes identify this delivery."""
        return self.model_dump(mode="json", exclude_none=True)

    @cached_property
    def digest(self) -> Digest:
        """SHA-256 of the canonical JSON of the whole delivery."""
        return digest_of(self.canonical())

    @cached_property
    def graph_digest(self) -> Digest:
        """SHA-256 of the canonical JSON of the graph alone (the compile-cache key)."""
        return graph_digest(self.graph)

    @cached_property
    def authority_digest(self) -> Digest:
        """SHA-256 of the canonical JSON of the authority policy."""
        return digest_of(self.authority.model_dump(mode="json", exclude_none=True))

    @cached_property
    def delivery_id(self) -> DeliveryId:
        """A short, stable id derived from the digest."""
        return DeliveryId("d-" + self.digest.removeprefix("sha256:")[:24])


def graph_digest(graph: ControlGraph) -> Digest:
    """SHA-256 of the canonical JSON of a graph."""
    return digest_of(graph.model_dump(mode="json", exclude_none=True))
