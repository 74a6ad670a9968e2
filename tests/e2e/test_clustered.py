"""Clustered collections (`create` with `clusteredIndex`, MongoDB 5.3): mongod 7.0's checks
and codes, how listCollections and listIndexes show them, unchanged reads and writes, and
`expireAfterSeconds` expiring documents whose `_id` date is old (TTL monitor every second)."""

import datetime
import time

import pytest
from pymongo.errors import DuplicateKeyError, OperationFailure

from conftest import Server

SPEC = {"key": {"_id": 1}, "unique": True}


def code(db, **options):
    with pytest.raises(OperationFailure) as e:
        db.command("create", "x", **options)
    return e.value.code


def test_create_checks_the_spec_as_mongod(db):
    assert code(db, clusteredIndex={"key": {"_id": 1}, "unique": False}) == 5979700
    assert code(db, clusteredIndex={"key": {"a": 1}, "unique": True}) == 197
    assert code(db, clusteredIndex={"key": {"_id": 1}}) == 40414
    assert code(db, clusteredIndex={**SPEC, "v": 1}) == 5979704
    assert code(db, clusteredIndex={**SPEC, "other": 1}) == 40415
    assert code(db, clusteredIndex=True) == 5979703
    assert code(db, clusteredIndex=SPEC, capped=True, size=4096) == 6127800
    assert code(db, clusteredIndex=SPEC, expireAfterSeconds=-1) == 72
    assert code(db, expireAfterSeconds=10) == 72
    assert code(db, clusteredIndex=SPEC, idIndex={"key": {"_id": 1}, "name": "_id_"}) == 72
    assert "x" not in db.list_collection_names()


def test_listings_show_the_clustered_index(db):
    db.command("create", "c", clusteredIndex={**SPEC, "name": "byId"}, expireAfterSeconds=60)
    info = next(db.list_collections(filter={"name": "c"}))
    assert info["options"] == {
        "clusteredIndex": {"v": 2, "key": {"_id": 1}, "name": "byId", "unique": True},
        "expireAfterSeconds": 60,
    }
    assert "idIndex" not in info
    assert list(db.c.list_indexes()) == [
        {"v": 2, "key": {"_id": 1}, "name": "byId", "unique": True, "clustered": True}
    ]


def test_reads_and_writes_are_unchanged(db):
    db.command("create", "c", clusteredIndex=SPEC)
    db.c.insert_many([{"_id": i, "a": i % 3} for i in [5, 2, 9, 1]])
    assert [d["_id"] for d in db.c.find()] == [1, 2, 5, 9]
    assert db.c.find_one({"_id": 9}) == {"_id": 9, "a": 0}
    with pytest.raises(DuplicateKeyError):
        db.c.insert_one({"_id": 2})
    db.c.create_index("a")
    assert db.c.count_documents({"a": 2}) == 2
    assert [i["name"] for i in db.c.list_indexes()] == ["_id_", "a_1"]


def test_expire_after_seconds_deletes_old_id_dates(tmp_path):
    server = Server(tmp_path / "data", args=["--setParameter", "ttlMonitorSleepSecs=1"])
    try:
        with server.client() as c:
            db = c.t
            db.command("create", "c", clusteredIndex=SPEC, expireAfterSeconds=5)
            now = datetime.datetime.now(datetime.timezone.utc)
            db.c.insert_many(
                [
                    {"_id": now - datetime.timedelta(hours=1), "old": True},
                    {"_id": now + datetime.timedelta(hours=1), "old": False},
                    {"_id": "not a date", "old": False},
                ]
            )
            deadline = time.monotonic() + 15
            while db.c.count_documents({"old": True}) and time.monotonic() < deadline:
                time.sleep(0.2)
            assert db.c.count_documents({"old": True}) == 0
            assert db.c.count_documents({}) == 2
    finally:
        server.stop()
