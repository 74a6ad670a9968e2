"""`top` (what mongotop polls) and serverStatus's `globalLock`/`uptimeEstimate` (what
mongostat's qrw/arw columns read): per-collection time and count by mongod's event types,
admin only, and the commands running now."""

import pytest
from pymongo.errors import OperationFailure

EVENTS = ["total", "readLock", "writeLock", "queries", "getmore", "insert", "update", "remove", "commands"]


def test_top_counts_each_collections_operations_by_event(client):
    coll = client.topdb.things
    coll.insert_one({"_id": 1})
    coll.insert_many([{"_id": i} for i in range(2, 12)])
    list(coll.find({}).batch_size(2))
    coll.update_one({"_id": 1}, {"$set": {"a": 1}})
    coll.delete_one({"_id": 2})
    coll.count_documents({})
    totals = client.admin.command("top")["totals"]
    assert totals["note"] == "all times in micros"
    usage = totals["topdb.things"]
    assert list(usage) == EVENTS
    for event in EVENTS:
        assert set(usage[event]) == {"time", "count"}
        assert usage[event]["time"] >= 0
    assert usage["insert"]["count"] == 2
    assert usage["queries"]["count"] == 1
    assert usage["getmore"]["count"] >= 5
    assert usage["update"]["count"] == 1
    assert usage["remove"]["count"] == 1
    assert usage["commands"]["count"] >= 1
    reads, writes = usage["readLock"]["count"], usage["writeLock"]["count"]
    assert writes == 4
    assert usage["total"]["count"] == reads + writes
    assert usage["total"]["time"] == usage["readLock"]["time"] + usage["writeLock"]["time"]


def test_top_runs_only_against_admin(client):
    with pytest.raises(OperationFailure) as e:
        client.topdb.command("top")
    assert e.value.code == 13


def test_server_status_has_global_lock_and_uptime_estimate(client):
    status = client.admin.command("serverStatus")
    lock = status["globalLock"]
    assert lock["totalTime"] > 0
    assert set(lock["currentQueue"]) == {"total", "readers", "writers"}
    assert set(lock["activeClients"]) == {"total", "readers", "writers"}
    assert isinstance(status["uptimeEstimate"], int)
