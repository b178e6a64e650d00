"""Console form posts: urlencoded bodies, each carrying its session's CSRF token."""

from __future__ import annotations

import hmac
from urllib.parse import parse_qs

from starlette.requests import Request

from contracts import ErrorCode, error
from execution_system.web._state import Session

MAX_FORM_BYTES = 1 << 20


async def read_form(request: Request) -> dict[str, str]:
    """The posted fields (the last value of each), bounded in size."""
    data = b""
    async for chunk in request.stream():
        data += chunk
        if len(data) > MAX_FORM_BYTES:
            raise error(ErrorCode.FILE_TOO_LARGE, "form is too large", path="form")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise error(ErrorCode.FILE_NOT_TEXT, "form is not UTF-8", path="form") from None
    fields = parse_qs(text, keep_blank_values=True, max_num_fields=64)
    return {name: values[-1] for name, values in fields.items()}


def check_csrf(session: Session | None, form: dict[str, str]) -> Session:
    """Refuse a post whose CSRF field is not its session's token."""
    if session is None:
        raise error(ErrorCode.AUTH_REQUIRED, "not logged in", path="session", expected="/login")
    if not hmac.compare_digest(form.get("csrf", "").encode(), session.csrf.encode()):
        raise error(
            ErrorCode.CSRF_INVALID,
            "the form's CSRF token does not match the session",
            path="csrf",
            expected="a form served by this console in this session",
        )
    return session
