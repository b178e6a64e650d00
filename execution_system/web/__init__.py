"""The HTTP API and operator console over the Host's public API (``execsys web``)."""

from execution_system.web._app import CSP, create_app
from execution_system.web._auth import ROLE_ACTIONS, Action, Principal
from execution_system.web._errors import http_status
from execution_system.web._events import ChangeFeed
from execution_system.web._openapi import openapi_document
from execution_system.web._state import fleet_source
from execution_system.web._tokens import Role, Tokens, add_token, hash_token, load_tokens

__all__ = [
    "CSP",
    "ROLE_ACTIONS",
    "Action",
    "ChangeFeed",
    "Principal",
    "Role",
    "Tokens",
    "add_token",
    "create_app",
    "fleet_source",
    "hash_token",
    "http_status",
    "load_tokens",
    "openapi_document",
]
