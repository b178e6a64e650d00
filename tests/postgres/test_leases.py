"""Lease rows on PostgreSQL: grants, expiry, renewal, release and fencing, across processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from contracts import ErrorCode, ExecsysError
from host.storage.postgres import aconnect, check_token, grant, migrate, release, renew


def run(coro: Any) -> Any:
    return asyncio.run(coro)


async def with_conn(url: str, fn: Any) -> Any:
    conn = await aconnect(url)
    try:
        return await fn(conn)
    finally:
        await conn.close()


def test_grant_renew_expire_release_and_the_token_only_grows(pg_url: str) -> None:
    migrate(pg_url)

    async def body(conn: Any) -> None:
        first = await grant(conn, "d", "a", 30)
        assert first == 1
        assert await grant(conn, "d", "b", 30) is None  # held and live
        assert await renew(conn, "d", "a", 1, 30)
        await release(conn, "d", 1)
        second = await grant(conn, "d", "b", 0.0)  # released: free at once
        assert second == 2
        third = await grant(conn, "d", "c", 30)  # b's lease expired (ttl 0)
        assert third == 3
        assert not await renew(conn, "d", "b", 2, 30)  # b lost it
        await release(conn, "d", 2)  # a stale release changes nothing
        assert await grant(conn, "d", "a", 30) is None
        # A holder known to be dead is taken over before its expiry.
        assert await grant(conn, "d", "a", 30, dead=["c"]) == 4

    run(with_conn(pg_url, body))


def test_a_stale_token_is_refused_inside_the_transaction_and_nothing_applies(
    pg_url: str,
) -> None:
    migrate(pg_url)

    async def body(conn: Any) -> None:
        old = await grant(conn, "d", "a", 0.0)
        assert await grant(conn, "d", "b", 30) == (old or 0) + 1
        with pytest.raises(ExecsysError) as caught:  # noqa: PT012
            async with conn.transaction(), conn.cursor() as cur:
                await cur.execute(
                    "INSERT INTO execsys_stops (delivery, requested, actor) VALUES ('d', 0, 'a')"
                )
                await check_token(cur, "d", old)
        assert caught.value.code is ErrorCode.LEASE_FENCED
        cur = await conn.execute("SELECT count(*) AS n FROM execsys_stops")
        assert (await cur.fetchone())["n"] == 0

    run(with_conn(pg_url, body))


def test_a_grant_waits_for_a_write_in_flight_then_fences_the_next_one(pg_url: str) -> None:
    """FOR SHARE orders a takeover after the write that checked the old token."""
    migrate(pg_url)

    async def body() -> None:
        writer = await aconnect(pg_url)
        taker = await aconnect(pg_url)
        try:
            token = await grant(writer, "d", "a", 0.0)
            async with writer.transaction(), writer.cursor() as cur:
                await check_token(cur, "d", token)
                takeover = asyncio.create_task(grant(taker, "d", "b", 30))
                await asyncio.sleep(0.2)
                assert not takeover.done()  # blocked on the row the write holds
                await cur.execute(
                    "INSERT INTO execsys_stops (delivery, requested, actor) VALUES ('d', 0, 'a')"
                )
            assert await takeover == (token or 0) + 1
            with pytest.raises(ExecsysError):
                async with writer.transaction(), writer.cursor() as cur:
                    await check_token(cur, "d", token)
        finally:
            await writer.close()
            await taker.close()

    run(body())


RACER = textwrap.dedent(
    """
    import asyncio, sys
    from host.storage.postgres import aconnect, grant

    async def main():
        conn = await aconnect(sys.argv[1])
        won = []
        for i in range(int(sys.argv[3])):
            if await grant(conn, f"d{i}", sys.argv[2], 60) is not None:
                won.append(i)
        print(" ".join(map(str, won)))
        await conn.close()

    asyncio.run(main())
    """
)


@pytest.mark.slow
def test_racing_processes_never_both_hold_a_delivery(pg_url: str) -> None:
    migrate(pg_url)
    rounds = 200
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, pg_url, name, str(rounds)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b", "c")
    ]
    won = [set(map(int, p.communicate(timeout=120)[0].split())) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert won[0] | won[1] | won[2] == set(range(rounds))
    assert sum(len(w) for w in won) == rounds  # exactly one winner per delivery
    with psycopg.connect(pg_url, row_factory=dict_row) as conn:
        tokens = conn.execute("SELECT DISTINCT token FROM execsys_leases").fetchall()
    assert [r["token"] for r in tokens] == [1]
