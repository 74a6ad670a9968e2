"""The express path of `find_one({_id: v})` (issue 23 item 1; mongod 8.0's EXPRESS_IDHACK)
answers exactly what the general path answers. Each lookup runs twice: as drivers send it
(express) and with `skip: 0` added, which sends it through the planner; the replies must be
equal, for every `_id` type, found or not, on a view, under a collation, in a transaction,
and through the profiler's counts."""

import datetime

import pytest
from bson import Decimal128, Int64, ObjectId, Regex
from bson.son import SON

OID = ObjectId()
WHEN = datetime.datetime(2024, 5, 1, 12, 0, 0)
IDS = [1, Int64(2), 3.0, -0.0, "k", "", OID, WHEN, True, False, None,
       Decimal128("4"), {"a": 1}, [5], Regex("^k")]


def lookup(db, coll, value, extra=()):
    cmd = SON([("find", coll), ("filter", {"_id": value}), ("limit", 1),
               ("singleBatch", True), *extra])
    reply = db.command(cmd)
    return reply["cursor"]["firstBatch"], reply["cursor"]["id"], reply["cursor"]["ns"]


def both(db, coll, value):
    express = lookup(db, coll, value)
    general = lookup(db, coll, value, [("skip", 0)])
    assert express == general, (value, express, general)
    return express[0]


def test_every_id_type_found_and_missing_agrees(coll):
    stored = [1, 2, 3, 0, "k", "", OID, WHEN, True, None, {"a": 1}]
    coll.insert_many([{"_id": v, "n": i} for i, v in enumerate(stored)])
    for value in IDS + [7, "absent", ObjectId(), 2.5, float("nan")]:
        both(coll.database, coll.name, value)
    # Numbers are one key across types, as they are one value to $eq.
    assert both(coll.database, coll.name, Int64(1)) == [{"_id": 1, "n": 0}]
    assert both(coll.database, coll.name, 2.0) == [{"_id": 2, "n": 1}]
    assert both(coll.database, coll.name, "k") == [{"_id": "k", "n": 4}]


def test_missing_collection_and_view(db):
    assert both(db, "nothing_here", 1) == []
    db["base"].insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 2}])
    db.command("create", "v", viewOn="base", pipeline=[{"$match": {"x": 2}}])
    assert both(db, "v", 1) == []
    assert both(db, "v", 2) == [{"_id": 2, "x": 2}]


def test_a_collection_collation_applies_to_string_ids(db):
    db.create_collection("ci", collation={"locale": "en", "strength": 2})
    db["ci"].insert_one({"_id": "Key"})
    assert both(db, "ci", "key") == [{"_id": "Key"}]
    assert both(db, "ci", "KEY") == [{"_id": "Key"}]


def test_options_that_change_the_answer_still_apply(coll):
    coll.insert_one({"_id": 1, "a": 1, "b": 2})
    db = coll.database
    assert lookup(db, coll.name, 1, [("projection", {"a": 1})])[0] == [{"_id": 1, "a": 1}]
    assert lookup(db, coll.name, 1, [("skip", 1)])[0] == []
    with pytest.raises(Exception) as e:
        lookup(db, coll.name, 1, [("limit", -3), ("singleBatch", "yes")])
    assert getattr(e.value, "code", None) in (14, 2, 51024)


def test_a_transaction_sees_its_own_write(client):
    coll = client["express"]["txn"]
    coll.insert_one({"_id": 1, "v": "old"})
    with client.start_session() as s:
        s.start_transaction()
        coll.update_one({"_id": 1}, {"$set": {"v": "new"}}, session=s)
        assert coll.find_one({"_id": 1}, session=s)["v"] == "new"
        assert coll.find_one({"_id": 1})["v"] == "old"
        s.abort_transaction()
    assert coll.find_one({"_id": 1})["v"] == "old"


def test_the_profiler_counts_one_key_and_one_document(coll):
    db = coll.database
    coll.insert_many([{"_id": i} for i in range(10)])
    db.command("profile", 2)
    coll.find_one({"_id": 4})
    coll.find_one({"_id": 40})
    db.command("profile", 0)
    entries = list(db["system.profile"].find({"op": "query", "ns": coll.full_name}))
    got = sorted((e["keysExamined"], e["docsExamined"], e["nreturned"]) for e in entries)
    assert got == [(1, 0, 0), (1, 1, 1)]
