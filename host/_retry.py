"""Retry delays under a node's ``retry`` policy."""

from __future__ import annotations

from contracts import RetryPolicy


def may_retry(policy: RetryPolicy | None, attempt: int) -> bool:
    """Whether attempt ``attempt`` (1-based) may be followed by another."""
    return policy is not None and attempt < policy.max_attempts


def backoff_s(policy: RetryPolicy, next_attempt: int) -> float:
    """Delay before ``next_attempt`` (2 = the first retry)."""
    if next_attempt <= 1:
        return 0.0
    delay = policy.backoff_s * policy.multiplier ** (next_attempt - 2)
    return float(min(delay, policy.max_backoff_s))
