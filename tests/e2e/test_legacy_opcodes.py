"""Legacy opcodes as a pre-3.6 driver sends them (issue 26): queries on collections with
their batches, getMores, kills, the fire-and-forget writes with getLastError, and errors
that come back flagged as QueryFailure, never as a result document."""

import struct

import pytest

from legacy_client import (
    CURSOR_NOT_FOUND,
    OP_QUERY,
    QUERY_FAILURE,
    LegacyClient,
)

NS = "legacy.docs"


@pytest.fixture
def legacy(shared_server):
    c = LegacyClient(shared_server.port)
    c.command("legacy", {"drop": "docs"})
    yield c
    c.close()


def fill(c: LegacyClient, n: int) -> None:
    for start in range(0, n, 500):
        c.insert(NS, [{"_id": i, "v": i % 7, "s": f"d{i}"} for i in range(start, min(n, start + 500))])
    gle = c.command("legacy", {"getLastError": 1})
    assert gle["err"] is None and gle["ok"] == 1.0


def test_a_2500_document_cursor_through_get_mores(legacy):
    fill(legacy, 2500)
    first = legacy.query(NS, {})
    assert first.flags & QUERY_FAILURE == 0
    assert len(first.docs) == 101 and first.starting_from == 0 and first.cursor_id != 0
    seen = [d["_id"] for d in first.docs]
    cursor = first.cursor_id
    while cursor:
        more = legacy.get_more(NS, cursor, to_return=400)
        assert more.starting_from == len(seen)
        seen += [d["_id"] for d in more.docs]
        cursor = more.cursor_id
    assert sorted(seen) == list(range(2500)) and len(seen) == 2500


def test_find_one_orderby_projection_skip(legacy):
    fill(legacy, 50)
    one = legacy.query(NS, {"v": 3}, to_return=-1)
    assert len(one.docs) == 1 and one.cursor_id == 0 and one.docs[0]["v"] == 3
    # numberToReturn 1 is a findOne too.
    assert legacy.query(NS, {}, to_return=1).cursor_id == 0
    ordered = legacy.query(NS, {"$query": {"v": 1}, "$orderby": {"_id": -1}}, fields={"s": 1, "_id": 0})
    assert ordered.docs[0] == {"s": "d43"}
    assert [d["s"] for d in ordered.docs] == [f"d{i}" for i in range(43, -1, -7)]
    skipped = legacy.query(NS, {"query": {}, "orderby": {"_id": 1}}, skip=45)
    assert [d["_id"] for d in skipped.docs] == [45, 46, 47, 48, 49]
    plain = legacy.query(NS, {"_id": {"$lt": 5}}, to_return=2)
    assert len(plain.docs) == 2 and plain.cursor_id != 0
    legacy.kill_cursors(plain.cursor_id)


def test_update_remove_and_get_last_error(legacy):
    fill(legacy, 10)
    legacy.update(NS, {"v": 1}, {"$set": {"hit": True}}, multi=True)
    gle = legacy.command("legacy", {"getlasterror": 1})
    assert (gle["n"], gle["updatedExisting"], gle["err"]) == (2, True, None)
    legacy.update(NS, {"_id": 100}, {"$set": {"new": 1}}, upsert=True)
    gle = legacy.command("legacy", {"getLastError": 1})
    assert (gle["n"], gle["updatedExisting"], gle["upserted"]) == (1, False, 100)
    legacy.delete(NS, {"v": 1}, single=True)
    assert legacy.command("legacy", {"getLastError": 1})["n"] == 1
    legacy.delete(NS, {})
    assert legacy.command("legacy", {"getLastError": 1})["n"] == 10
    legacy.insert(NS, [{"_id": 1}, {"_id": 1}, {"_id": 2}], continue_on_error=True)
    gle = legacy.command("legacy", {"getLastError": 1})
    assert gle["code"] == 11000 and gle["err"]
    assert len(legacy.query(NS, {}).docs) == 2


def test_errors_come_back_as_query_failure(legacy):
    fill(legacy, 5)
    bad = legacy.query(NS, {"a": {"$bogus": 1}})
    assert bad.flags & QUERY_FAILURE
    assert len(bad.docs) == 1 and bad.cursor_id == 0
    assert bad.docs[0]["$err"] and isinstance(bad.docs[0]["code"], int) and bad.docs[0]["ok"] == 0
    unsupported = legacy.query(NS, {"$query": {}, "$min": {"_id": 1}})
    assert unsupported.flags & QUERY_FAILURE
    tailable = legacy.query(NS, {}, flags=2)
    assert tailable.flags & QUERY_FAILURE
    # A malformed OP_QUERY: an error, and the connection goes on.
    rid = legacy.raw(OP_QUERY, struct.pack("<i", 0) + b"legacy.docs")
    assert legacy.reply(rid).flags & QUERY_FAILURE
    assert legacy.command("legacy", {"ping": 1})["ok"] == 1.0


def test_get_more_on_a_killed_cursor_is_cursor_not_found(legacy):
    fill(legacy, 300)
    first = legacy.query(NS, {}, to_return=10)
    assert first.cursor_id
    legacy.kill_cursors(first.cursor_id)
    gone = legacy.get_more(NS, first.cursor_id)
    assert gone.flags & CURSOR_NOT_FOUND and gone.docs == [] and gone.cursor_id == 0


def test_explain(legacy):
    fill(legacy, 3)
    plan = legacy.query(NS, {"$query": {"_id": 1}, "$explain": True}, to_return=-1)
    assert plan.flags & QUERY_FAILURE == 0
    assert "queryPlanner" in plan.docs[0]
