"""The OpenAPI 3.1 document of ``/api/v1``, written out rather than derived.

It is the API's contract: tests check every route against it and schemathesis
checks the server's answers against it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from contracts import DeliveryStatus

_ID = {"type": "string", "minLength": 1}
_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "path"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "path": {"type": "string"},
            },
        }
    },
}
_STATUS = {
    "type": "object",
    "required": ["delivery", "status", "outcome", "suspension", "wait", "message"],
    "properties": {
        "delivery": {"type": "string"},
        "graph": {"type": "string"},
        "status": {"enum": [s.value for s in DeliveryStatus]},
        "outcome": {"type": ["string", "null"]},
        "suspension": {
            "oneOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "required": ["correlation", "node", "question"],
                    "properties": {"correlation": {"type": "string"}, "node": {"type": "string"}},
                },
            ]
        },
        "suspensions": {"type": "array"},
        "wait": {
            "oneOf": [
                {"type": "null"},
                {
                    "type": "object",
                    "required": ["node", "kind"],
                    "properties": {"node": {"type": "string"}, "kind": {"type": "string"}},
                },
            ]
        },
        "message": {"type": "string"},
        "updated": {"type": "string"},
    },
}
_ROW = {
    "type": "object",
    "required": ["delivery", "graph", "status", "outcome", "updated"],
    "properties": {
        "delivery": {"type": "string"},
        "graph": {"type": "string"},
        "status": {"enum": [s.value for s in DeliveryStatus]},
        "outcome": {"type": ["string", "null"]},
        "updated": {"type": "string"},
    },
}
_LIST = {
    "type": "object",
    "required": ["deliveries", "total", "next", "needs_directive"],
    "properties": {
        "deliveries": {"type": "array", "items": {"$ref": "#/components/schemas/DeliveryRow"}},
        "total": {"type": "integer", "minimum": 0},
        "next": {"type": ["string", "null"]},
        "needs_directive": {"type": "array"},
    },
}
_INSPECT = {
    "type": "object",
    "required": ["delivery", "status", "directives"],
    "properties": {
        "delivery": {"type": "string"},
        "status": {"enum": [s.value for s in DeliveryStatus]},
        "nodes": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "required": ["state", "attempts", "activations"],
            },
        },
        "journal": {"type": "object", "required": ["head", "events"]},
        "directives": {"type": "array", "items": {"type": "string"}},
    },
}
_GRAPH = {
    "type": "object",
    "required": ["delivery", "graph", "start", "nodes", "edges", "path", "parallels"],
    "properties": {
        "nodes": {
            "type": "array",
            "items": {"type": "object", "required": ["id", "kind", "state"]},
        },
        "edges": {
            "type": "array",
            "items": {"type": "object", "required": ["from", "to", "kind", "label"]},
        },
        "path": {"type": "array", "items": {"type": "string"}},
        "parallels": {"type": "array"},
    },
}

_QUEUE = {"type": ["boolean", "null"]}
"""``queue``: leave the work to the fleet (default: when a live ``serve`` runner is listed)."""

_BODIES: dict[str, dict[str, Any]] = {
    "AdmitBody": {
        "type": "object",
        "additionalProperties": False,
        "required": ["spec"],
        "properties": {
            "spec": {"type": "object"},
            "input": {"type": "object"},
            "authority": {"type": ["object", "null"]},
            "key": {"type": ["string", "null"], "minLength": 1, "maxLength": 256},
            "queue": _QUEUE,
        },
    },
    "AnswerBody": {
        "type": "object",
        "additionalProperties": False,
        "required": ["correlation", "response"],
        "properties": {
            "correlation": {"type": "string", "minLength": 1},
            "response": {},
            "queue": _QUEUE,
        },
    },
    "ResolveBody": {
        "type": "object",
        "additionalProperties": False,
        "required": ["node", "role", "result"],
        "properties": {
            "node": {"type": "string", "minLength": 1},
            "role": {"type": "string", "minLength": 1},
            "result": {},
            "queue": _QUEUE,
        },
    },
    "RecoverBody": {
        "type": "object",
        "additionalProperties": False,
        "required": ["directive", "reason"],
        "properties": {
            "directive": {"enum": ["continue", "restart-from-savepoint", "intervene"]},
            "reason": {"type": "string", "minLength": 1, "maxLength": 2000},
            "savepoint": {"type": ["string", "null"]},
            "node": {"type": ["string", "null"]},
            "result": {},
            "fail": {"type": "boolean"},
            "queue": _QUEUE,
        },
    },
    "StopBody": {
        "type": "object",
        "additionalProperties": False,
        "properties": {"wait_s": {"type": "number", "minimum": 0, "maximum": 300}},
    },
    "RetireBody": {
        "type": "object",
        "additionalProperties": False,
        "required": ["authorization"],
        "properties": {"authorization": {"type": "string", "minLength": 1, "maxLength": 256}},
    },
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _errors(*statuses: int) -> dict[str, Any]:
    return {
        str(s): {
            "description": "an error in the one error shape",
            "content": {"application/json": {"schema": _ref("Error")}},
        }
        for s in statuses
    }


def _op(
    summary: str,
    schema: dict[str, Any] | None,
    *,
    ok: int = 200,
    body: str | None = None,
    media: str = "application/json",
    params: list[dict[str, Any]] | None = None,
    errors: tuple[int, ...] = (400, 401, 403, 404),
) -> dict[str, Any]:
    content = {media: {"schema": schema}} if schema is not None else {media: {}}
    operation: dict[str, Any] = {
        "summary": summary,
        "responses": {str(ok): {"description": "success", "content": content}, **_errors(*errors)},
    }
    if params:
        operation["parameters"] = params
    if body:
        operation["requestBody"] = {
            "required": body != "StopBody",
            "content": {"application/json": {"schema": _ref(body)}},
        }
    return operation


_DELIVERY = [{"name": "delivery", "in": "path", "required": True, "schema": _ID}]
_GOAL = [{"name": "goal", "in": "path", "required": True, "schema": _ID}]
_MUTATE = (400, 401, 403, 404, 409, 422, 503)


@cache
def openapi_document() -> dict[str, Any]:
    """The document served at ``/api/v1/openapi.json``."""
    listing = [
        {"name": "status", "in": "query", "schema": {"enum": [s.value for s in DeliveryStatus]}},
        {"name": "graph", "in": "query", "schema": {"type": "string"}},
        {"name": "needs-directive", "in": "query", "schema": {"enum": ["true", "false"]}},
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": 500},
        },
        {"name": "cursor", "in": "query", "schema": {"type": "string", "pattern": "^[0-9]{1,9}$"}},
    ]
    events = [
        {"name": "delivery", "in": "query", "schema": _ID},
        {"name": "max_events", "in": "query", "schema": {"type": "integer", "minimum": 0}},
    ]
    paths: dict[str, Any] = {
        "/deliveries": {
            "get": _op("List deliveries (newest first), one page", _ref("List"), params=listing),
            "post": _op(
                "Admit a delivery and run it to its next stop",
                _ref("Status"),
                ok=201,
                body="AdmitBody",
                errors=_MUTATE,
            ),
        },
        "/deliveries/{delivery}": {
            "get": _op("A delivery's status", _ref("Status"), params=_DELIVERY)
        },
        "/deliveries/{delivery}/inspect": {
            "get": _op(
                "Nodes, attempts, heads, savepoints, directives", _ref("Inspect"), params=_DELIVERY
            )
        },
        "/deliveries/{delivery}/journal": {
            "get": _op(
                "The journal as JSON Lines (the bytes of 'execsys journal export')",
                {"type": "string"},
                media="application/x-ndjson",
                params=_DELIVERY,
            )
        },
        "/deliveries/{delivery}/graph": {
            "get": _op("Nodes, edges, states and the path taken", _ref("Graph"), params=_DELIVERY)
        },
        "/runners": {
            "get": _op("Processes serving the store", {"type": "object"}, errors=(401, 403))
        },
        "/goals": {"get": _op("CodeClosure goals", {"type": "object"}, errors=(401, 403))},
        "/goals/{goal}": {
            "get": _op("A goal's status and audit", {"type": "object"}, params=_GOAL)
        },
        "/goals/{goal}/export": {
            "get": _op(
                "The accepted change as a unified diff (the text of 'execsys goal export')",
                {"type": "string"},
                media="text/x-diff",
                params=_GOAL,
                errors=(400, 401, 403, 404, 409),
            )
        },
        "/events": {
            "get": _op(
                "Server-sent events: one 'status' event per delivery status change",
                {"type": "string"},
                media="text/event-stream",
                params=events,
            )
        },
    }
    for verb, body, summary in (
        ("input", "AnswerBody", "Answer a pending action-input question"),
        ("resolve", "ResolveBody", "Resolve a pending wait as the token's actor"),
        ("recover", "RecoverBody", "Apply a recovery directive"),
        ("stop", "StopBody", "Stop at the next safe boundary"),
        ("retire", "RetireBody", "Retire a finished delivery"),
    ):
        schema = {"type": "object"} if verb == "retire" else _ref("Status")
        paths[f"/deliveries/{{delivery}}/{verb}"] = {
            "post": _op(summary, schema, body=body, params=_DELIVERY, errors=_MUTATE)
        }
    return {
        "openapi": "3.1.0",
        "info": {"title": "execution-system", "version": "1"},
        "servers": [{"url": "/api/v1"}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": _ERROR,
                "Status": _STATUS,
                "DeliveryRow": _ROW,
                "List": _LIST,
                "Inspect": _INSPECT,
                "Graph": _GRAPH,
                **_BODIES,
            },
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }
