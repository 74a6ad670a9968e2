"""Hashed indexes (`{field: "hashed"}`, mongod's `BSONElementHasher` keys): equality and
`$in` read the index by hash, everything else reads correctly without its order; results
always equal a naive evaluation; mongod's refusals (unique 16764, arrays 16766, two hashed
fields 31303)."""

import datetime

import pytest
from bson import ObjectId
from pymongo.errors import OperationFailure, WriteError

VALUES = [0, 1, 1.0, 1.5, -7, 2**40, "x", "", "1", True, None, {"k": 1}, {"k": [1, 2]},
          ObjectId("010203040506070809101112"), datetime.datetime(2026, 1, 1)]


def plan_of(db, filt):
    e = db.command("explain", {"find": "c", "filter": filt}, verbosity="queryPlanner")
    return str(e["queryPlanner"]["winningPlan"])


def test_equality_and_in_read_the_hashes(db):
    docs = [{"_id": i, "a": v} for i, v in enumerate(VALUES)] + [{"_id": 100}]
    db.c.insert_many(docs)
    assert db.c.create_index([("a", "hashed")]) == "a_hashed"
    spec = next(i for i in db.c.list_indexes() if i["name"] == "a_hashed")
    assert dict(spec["key"]) == {"a": "hashed"}
    for v in VALUES:
        got = sorted(d["_id"] for d in db.c.find({"a": v}))
        want = sorted(d["_id"] for d in db.c.find({"a": v}).hint({"$natural": 1}))
        assert got == want, v
    assert "a_hashed" in plan_of(db, {"a": "x"})
    got = sorted(d["_id"] for d in db.c.find({"a": {"$in": [1, "x", None]}}))
    want = sorted(d["_id"] for d in db.c.find({"a": {"$in": [1, "x", None]}}).hint(
        {"$natural": 1}))
    assert got == want
    # Ranges and sorts are answered, not from the hashes' order.
    ranged = sorted(d["_id"] for d in db.c.find({"a": {"$gt": 0, "$lt": 2}}))
    assert ranged == [1, 2, 3]
    by_a = [d["a"] for d in db.c.find({"a": {"$type": "number"}}).sort("a", 1)]
    assert by_a == sorted(by_a)


def test_mongods_refusals(db):
    with pytest.raises(OperationFailure) as e:
        db.c.create_index([("a", "hashed")], unique=True)
    assert e.value.code == 16764
    with pytest.raises(OperationFailure) as e:
        db.c.create_index([("a", "hashed"), ("b", "hashed")])
    assert e.value.code == 31303
    db.c.create_index([("a", "hashed"), ("b", 1)])
    db.c.insert_one({"_id": 1, "a": 5, "b": 2})
    with pytest.raises(WriteError) as e:
        db.c.insert_one({"_id": 2, "a": [1, 2]})
    assert e.value.code == 16766
    assert db.c.find_one({"a": 5, "b": 2})["_id"] == 1
    db.d.insert_one({"a": [1]})
    with pytest.raises(OperationFailure) as e:
        db.d.create_index([("a", "hashed")])
    assert e.value.code == 16766


def test_to_hashed_index_key_gives_the_index_key(db):
    # mongod's own vector: the hash of 42 (hasher_test.cpp); missing hashes as null.
    db.c.insert_one({"_id": 1, "a": 42})
    got = next(db.c.aggregate([{"$project": {"_id": 0, "h": {"$toHashedIndexKey": "$a"},
                                              "n": {"$toHashedIndexKey": "$none"},
                                              "z": {"$toHashedIndexKey": None}}}]))
    assert got["h"] == -944302157085130861
    assert got["n"] == got["z"]
