"""Decision 0154 on PostgreSQL: the same commits skip the flush wait as on SQLite."""

from __future__ import annotations

from pathlib import Path

from tests.host.test_flush import check_commits, commits_of_an_asked_and_answered_delivery


def test_a_run_and_an_answer_flush_every_commit_that_keeps_an_event(
    pg_url: str, tmp_path: Path
) -> None:
    check_commits(commits_of_an_asked_and_answered_delivery(pg_url, tmp_path))
