"""Snapshot reads outside transactions (issue 24 item 9; docs/transactions.md, Snapshot
reads): `readConcern: {level: "snapshot"}` on find/aggregate/distinct of a `--replSet`
member reads one cluster time, returns it as `atClusterTime`, and later reads at that
`atClusterTime` see the same state whatever was written since; `snapshot=True` sessions do
this through the driver. What cannot be honoured is refused with mongod's codes."""

import time

import pytest
from bson import Timestamp
from pymongo.errors import OperationFailure



def snap(at=None):
    rc = {"level": "snapshot"}
    if at is not None:
        rc["atClusterTime"] = at
    return rc


def test_reads_at_an_earlier_cluster_time_see_that_state(primary):
    with primary.client() as c:
        db = c.app
        db.items.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 1}])
        db.items.create_index("x")
        first = db.command("find", "items", filter={}, readConcern=snap())
        at = first["cursor"]["atClusterTime"]
        assert isinstance(at, Timestamp)
        assert [d["x"] for d in first["cursor"]["firstBatch"]] == [1, 1]
        db.items.update_many({}, {"$inc": {"x": 10}})
        db.items.insert_one({"_id": 3, "x": 5})
        again = db.command("find", "items", filter={"x": 1}, readConcern=snap(at))
        assert again["cursor"]["atClusterTime"] == at
        assert [d["_id"] for d in again["cursor"]["firstBatch"]] == [1, 2]
        agg = db.command(
            "aggregate",
            "items",
            pipeline=[{"$group": {"_id": None, "n": {"$sum": 1}}}],
            cursor={},
            readConcern=snap(at),
        )
        assert agg["cursor"]["firstBatch"][0]["n"] == 2
        assert agg["cursor"]["atClusterTime"] == at
        dist = db.command("distinct", "items", key="x", readConcern=snap(at))
        assert dist["values"] == [1] and dist["atClusterTime"] == at
        # Without atClusterTime, the newest state.
        now = db.command("distinct", "items", key="x", readConcern=snap())
        assert now["values"] == [5, 11] and now["atClusterTime"] > at


def test_a_getmore_keeps_reading_the_snapshot(primary):
    with primary.client() as c:
        db = c.app
        db.items.insert_many([{"_id": i} for i in range(10)])
        first = db.command("find", "items", batchSize=3, readConcern=snap())
        db.items.delete_many({})
        cursor_id = first["cursor"]["id"]
        more = db.command("getMore", cursor_id, collection="items")
        got = first["cursor"]["firstBatch"] + more["cursor"]["nextBatch"]
        assert [d["_id"] for d in got] == list(range(10))


def test_snapshot_sessions_through_the_driver(primary):
    with primary.client() as c:
        coll = c.app.items
        coll.insert_one({"_id": 1, "x": 1})
        with c.start_session(snapshot=True) as s:
            assert coll.find_one({"_id": 1}, session=s)["x"] == 1
            coll.update_one({"_id": 1}, {"$set": {"x": 2}})
            assert coll.find_one({"_id": 1}, session=s)["x"] == 1
            assert coll.count_documents({}, session=s) == 1
        assert coll.find_one({"_id": 1})["x"] == 2


def test_what_cannot_be_honoured_is_refused(primary):
    with primary.client() as c:
        db = c.app
        db.items.insert_one({"_id": 1})
        at = db.command("find", "items", readConcern=snap())["cursor"]["atClusterTime"]
        db.items.insert_one({"_id": 2})
        db.items.insert_one({"_id": 3})
        ping = c.admin.command("ping")
        # A time between two writes that no snapshot read established: too old.
        newest = db.command("find", "items", readConcern=snap())["cursor"]["atClusterTime"]
        between = Timestamp(newest.time, newest.inc - 1) if newest.inc > 1 else at
        if between != at:
            with pytest.raises(OperationFailure) as e:
                db.command("find", "items", readConcern=snap(between))
            assert e.value.code == 239  # SnapshotTooOld
        future = Timestamp(ping["$clusterTime"]["clusterTime"].time + 3600, 1)
        with pytest.raises(OperationFailure) as e:
            db.command("find", "items", readConcern=snap(future))
        assert e.value.code == 72  # InvalidOptions
        for cmd in (
            {"count": "items", "readConcern": snap()},
            {"aggregate": "items", "pipeline": [{"$out": "o"}], "cursor": {}, "readConcern": snap()},
            {"find": "items", "readConcern": {"atClusterTime": at}},
        ):
            with pytest.raises(OperationFailure) as e:
                db.command(cmd)
            assert e.value.code == 72, cmd


def test_a_dropped_collection_is_snapshot_unavailable(primary):
    with primary.client() as c:
        db = c.app
        db.items.insert_one({"_id": 1})
        at = db.command("find", "items", readConcern=snap())["cursor"]["atClusterTime"]
        db.items.drop()
        db.items.insert_one({"_id": 2})
        with pytest.raises(OperationFailure) as e:
            db.command("find", "items", readConcern=snap(at))
        assert e.value.code == 246  # SnapshotUnavailable


def test_a_standalone_refuses_snapshot_reads(server):
    with server.client() as c:
        with pytest.raises(OperationFailure) as e:
            c.app.command("find", "items", readConcern=snap())
        assert e.value.code == 123  # NotAReplicaSet


def test_the_history_window_is_a_parameter(primary):
    with primary.client() as c:
        got = c.admin.command("getParameter", 1, minSnapshotHistoryWindowInSeconds=1)
        assert got["minSnapshotHistoryWindowInSeconds"] == 300
        c.admin.command("setParameter", 1, minSnapshotHistoryWindowInSeconds=0)
        with pytest.raises(OperationFailure) as e:
            c.admin.command("setParameter", 1, minSnapshotHistoryWindowInSeconds=-1)
        assert e.value.code == 2
        db = c.app
        db.items.insert_one({"_id": 1})
        at = db.command("find", "items", readConcern=snap())["cursor"]["atClusterTime"]
        db.items.insert_one({"_id": 2})
        # A zero window: the reaper (every second at most) drops the pin.
        deadline = time.time() + 5
        while True:
            try:
                db.command("find", "items", readConcern=snap(at))
            except OperationFailure as e:
                assert e.code == 239
                break
            assert time.time() < deadline, "the pin outlived a zero window"
            time.sleep(0.2)
