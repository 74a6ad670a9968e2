"""Capped collections (`create` with `capped: true, size, max`): mongod 7.0's option checks
and codes, rollover by size and by count in insertion order, natural order, deletes and
size-changing updates, tailable and awaitData cursors, listings, and a random run checked
against a list model of what a capped collection keeps."""

import random
import threading
import time

import bson
import pytest
from pymongo import CursorType
from pymongo.errors import OperationFailure, WriteError

from conftest import Server


def codes(db, **options):
    with pytest.raises(OperationFailure) as e:
        db.command("create", "x", **options)
    return e.value.code


def test_create_checks_options_as_mongod(db):
    assert codes(db, capped=True) == 72
    assert codes(db, capped=True, max=5) == 72
    assert codes(db, size=4096) == 72
    assert codes(db, max=5) == 72
    assert codes(db, capped=True, size=0) == 51024
    assert codes(db, capped=True, size=-1) == 51024
    assert codes(db, capped=True, size=(1 << 50) + 1) == 51024
    assert codes(db, capped=True, size=4096, max=1 << 31) == 51024
    assert codes(db, capped=True, size="big") == 14
    assert "x" not in db.list_collection_names()


def test_listings_and_stats_show_the_bounds(db):
    db.command("create", "c", capped=True, size=1000, max=7)
    db.command("create", "d", capped=True, size=5000)
    info = {c["name"]: c for c in db.list_collections()}
    assert info["c"]["options"] == {"capped": True, "size": 1024, "max": 7}
    assert info["d"]["options"] == {"capped": True, "size": 5120}
    stats = db.command("collStats", "c")
    assert (stats["capped"], stats["max"], stats["maxSize"]) == (True, 7, 1024)
    assert db.command("collStats", "d")["max"] == (1 << 63) - 1
    assert db.c.options()["capped"] is True


def test_rollover_by_count_keeps_the_newest_in_insertion_order(db):
    db.command("create", "c", capped=True, size=1 << 20, max=3)
    for i in [5, 1, 4, 2, 3]:
        db.c.insert_one({"_id": i})
    assert [d["_id"] for d in db.c.find()] == [4, 2, 3]
    assert [d["_id"] for d in db.c.find().sort("$natural", -1)] == [3, 2, 4]
    assert [d["_id"] for d in db.c.find().hint([("$natural", 1)])] == [4, 2, 3]
    assert [d["_id"] for d in db.c.find().sort("_id", 1)] == [2, 3, 4]
    db.c.insert_many([{"_id": 10}, {"_id": 9}, {"_id": 8}, {"_id": 7}])
    assert [d["_id"] for d in db.c.find()] == [9, 8, 7]
    assert db.c.count_documents({}) == 3


def test_rollover_by_size(db):
    db.command("create", "c", capped=True, size=4096)
    doc_size = len(bson.encode({"_id": 0, "pad": "x" * 1000}))
    for i in range(20):
        db.c.insert_one({"_id": i, "pad": "x" * 1000})
    kept = [d["_id"] for d in db.c.find()]
    assert kept == list(range(20 - 4096 // doc_size, 20))
    assert db.command("collStats", "c")["size"] <= 4096


def test_a_document_larger_than_the_collection_is_refused(db):
    db.command("create", "c", capped=True, size=256)
    db.c.insert_one({"_id": 1})
    with pytest.raises(WriteError) as e:
        db.c.insert_one({"_id": 2, "pad": "x" * 300})
    assert e.value.code == 2
    assert [d["_id"] for d in db.c.find()] == [1]


def test_deletes_and_updates_that_change_size_are_allowed(db):
    db.command("create", "c", capped=True, size=1 << 20, max=3)
    db.c.insert_many([{"_id": i, "s": "a"} for i in range(3)])
    db.c.update_one({"_id": 1}, {"$set": {"s": "a much longer string"}})
    db.c.delete_one({"_id": 0})
    assert [d["_id"] for d in db.c.find()] == [1, 2]
    db.c.insert_many([{"_id": 3}, {"_id": 4}])
    assert [d["_id"] for d in db.c.find()] == [2, 3, 4]
    db.c.insert_one({"_id": 1})
    assert [d["_id"] for d in db.c.find()] == [3, 4, 1]


def test_writes_in_a_transaction_are_refused(db, shared_client):
    db.command("create", "c", capped=True, size=4096)
    db.c.insert_one({"_id": 1})
    with shared_client.start_session() as s:
        s.start_transaction()
        with pytest.raises(OperationFailure) as e:
            db.c.insert_one({"_id": 2}, session=s)
        assert e.value.code == 263
        s.abort_transaction()


def test_tailable_await_data_cursor_sees_new_inserts(db):
    db.command("create", "c", capped=True, size=1 << 20)
    db.c.insert_many([{"_id": 1}, {"_id": 2}])
    cur = db.c.find(cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(5000)
    assert [cur.next()["_id"], cur.next()["_id"]] == [1, 2]

    def later():
        time.sleep(0.3)
        db.c.insert_one({"_id": 3})

    t = threading.Thread(target=later)
    started = time.monotonic()
    t.start()
    assert cur.next()["_id"] == 3
    assert time.monotonic() - started < 4
    t.join()
    assert cur.alive
    db.c.insert_many([{"_id": 4}, {"_id": 5}])
    assert [cur.next()["_id"], cur.next()["_id"]] == [4, 5]
    cur.close()


def test_tailable_cursor_runs_dry_and_stays_open(db):
    db.command("create", "c", capped=True, size=1 << 20)
    db.c.insert_one({"_id": 1})
    cur = db.c.find(cursor_type=CursorType.TAILABLE)
    assert [d["_id"] for d in cur] == [1]
    assert cur.alive
    db.c.insert_one({"_id": 2})
    assert [d["_id"] for d in cur] == [2]
    cur.close()


def test_tailable_position_lost_and_refusals(db):
    db.command("create", "c", capped=True, size=1 << 20, max=2)
    db.c.insert_many([{"_id": 1}, {"_id": 2}])
    reply = db.command("find", "c", tailable=True, batchSize=1)
    cursor_id = reply["cursor"]["id"]
    assert [d["_id"] for d in reply["cursor"]["firstBatch"]] == [1]
    db.c.insert_many([{"_id": 3}, {"_id": 4}])
    with pytest.raises(OperationFailure) as e:
        db.command("getMore", cursor_id, collection="c")
    assert e.value.code == 136
    with pytest.raises(OperationFailure) as e:
        db.command("find", "c", tailable=True, sort={"_id": 1})
    assert e.value.code == 2
    db.plain.insert_one({})
    with pytest.raises(OperationFailure) as e:
        db.command("find", "plain", tailable=True)
    assert e.value.code == 2


def test_out_into_a_capped_target_is_refused(db):
    db.command("create", "c", capped=True, size=4096)
    db.src.insert_one({"a": 1})
    with pytest.raises(OperationFailure) as e:
        list(db.src.aggregate([{"$out": "c"}]))
    assert e.value.code == 17152


def test_capped_survives_a_restart(tmp_path):
    server = Server(tmp_path / "data")
    with server.client() as c:
        c.t.command("create", "c", capped=True, size=1 << 20, max=3)
        c.t.c.insert_many([{"_id": i} for i in [3, 1, 2]])
    server.stop()
    server = Server(tmp_path / "data")
    try:
        with server.client() as c:
            c.t.c.insert_one({"_id": 0})
            assert [d["_id"] for d in c.t.c.find()] == [1, 2, 0]
            assert c.t.c.options() == {"capped": True, "size": 1 << 20, "max": 3}
    finally:
        server.stop()


def test_random_inserts_and_deletes_match_a_list_model(db):
    rng = random.Random(26)
    size, max_docs = 8192, 12
    db.command("create", "c", capped=True, size=size, max=max_docs)
    model = []  # (id, bytes) in insertion order
    next_id = 0
    for _ in range(300):
        if model and rng.random() < 0.15:
            victim = rng.choice(model)
            db.c.delete_one({"_id": victim[0]})
            model.remove(victim)
            continue
        batch = []
        for _ in range(rng.randint(1, 4)):
            doc = {"_id": next_id, "pad": "x" * rng.randint(0, 900)}
            next_id += 1
            batch.append(doc)
        db.c.insert_many(batch)
        model.extend((d["_id"], len(bson.encode(d))) for d in batch)
        while len(model) > max_docs or sum(b for _, b in model) > size:
            model.pop(0)
        assert [d["_id"] for d in db.c.find()] == [i for i, _ in model]
    stats = db.command("collStats", "c")
    assert stats["count"] == len(model)
    assert stats["size"] == sum(b for _, b in model)
    assert db.command("validate", "c")["valid"]
