"""Change streams on a `--replSet` member (issue 24 item 7, docs/design-oplog.md, Change
streams): `collection.watch()`, `db.watch()` and `client.watch()` through pymongo, each event
kind in mongod's shape, `updateLookup`, resuming from a token (also across a restart),
`startAfter` an invalidate, `startAtOperationTime`, a `postBatchResumeToken` that moves when
nothing matches, `ChangeStreamHistoryLost` after truncation, the stages allowed after
`$changeStream`, and the refusal on a standalone."""

import threading
import time

import pytest
from bson import Timestamp
from pymongo.errors import OperationFailure

from conftest import Server, start_member

SET = "rs0"


def take(stream, n, timeout=10):
    """The next `n` events of `stream`."""
    got = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        assert time.monotonic() < deadline, f"only {len(got)} of {n} events: {got}"
        e = stream.try_next()
        if e is not None:
            got.append(e)
    return got


def test_collection_stream_sees_each_kind_in_mongods_shape(primary):
    with primary.client() as c:
        coll = c.app.items
        coll.insert_one({"_id": 0})
        with coll.watch(max_await_time_ms=200) as s:
            coll.insert_one({"_id": 1, "a": 1, "b": 2, "arr": [1, 2, 3], "s": {"x": 1}})
            coll.update_one(
                {"_id": 1},
                {"$set": {"a": 5, "s.y": 2, "arr.1": 20}, "$unset": {"b": ""}},
            )
            coll.replace_one({"_id": 1}, {"x": 9})
            coll.delete_one({"_id": 1})
            c.app.other.insert_one({"_id": "elsewhere"})
            ins, upd, rep, dele = take(s, 4)
        assert ins["operationType"] == "insert"
        assert list(ins) == [
            "_id",
            "operationType",
            "clusterTime",
            "wallTime",
            "fullDocument",
            "ns",
            "documentKey",
        ]
        assert ins["fullDocument"] == {"_id": 1, "a": 1, "b": 2, "arr": [1, 2, 3], "s": {"x": 1}}
        assert ins["ns"] == {"db": "app", "coll": "items"}
        assert ins["documentKey"] == {"_id": 1}
        assert isinstance(ins["clusterTime"], Timestamp)
        assert set(ins["_id"]) == {"_data"} and isinstance(ins["_id"]["_data"], str)
        assert upd["operationType"] == "update"
        assert upd["updateDescription"] == {
            "updatedFields": {"a": 5, "arr.1": 20, "s.y": 2},
            "removedFields": ["b"],
            "truncatedArrays": [],
        }
        assert "fullDocument" not in upd
        assert rep["operationType"] == "replace" and rep["fullDocument"] == {"_id": 1, "x": 9}
        assert dele["operationType"] == "delete" and dele["documentKey"] == {"_id": 1}
        tokens = [e["_id"]["_data"] for e in (ins, upd, rep, dele)]
        assert tokens == sorted(tokens) and len(set(tokens)) == 4


def test_drop_and_rename_invalidate_a_collection_stream(primary):
    with primary.client() as c:
        c.app.gone.insert_one({"_id": 1})
        with c.app.gone.watch(max_await_time_ms=200) as s:
            c.app.gone.drop()
            drop, inv = take(s, 2)
            assert drop["operationType"] == "drop"
            assert drop["ns"] == {"db": "app", "coll": "gone"}
            assert inv["operationType"] == "invalidate"
            assert set(inv) == {"_id", "operationType", "clusterTime", "wallTime"}
            assert not s.alive or s.try_next() is None
        assert not s.alive
        # startAfter the invalidate: a new stream on the same name goes on after it.
        with c.app.gone.watch(start_after=inv["_id"], max_await_time_ms=200) as s2:
            c.app.gone.insert_one({"_id": "again"})
            (again,) = take(s2, 1)
            assert again["operationType"] == "insert" and again["documentKey"] == {"_id": "again"}
        # resumeAfter an invalidate is refused, as on mongod.
        with pytest.raises(OperationFailure) as e:
            c.app.gone.watch(resume_after=inv["_id"])
        assert e.value.code == 260
        c.app.src.insert_one({"_id": 1})
        with c.app.src.watch(max_await_time_ms=200) as s:
            c.app.src.rename("dst")
            ren, inv = take(s, 2)
        assert ren["operationType"] == "rename"
        assert ren["ns"] == {"db": "app", "coll": "src"}
        assert ren["to"] == {"db": "app", "coll": "dst"}
        assert inv["operationType"] == "invalidate"


def test_database_and_cluster_streams(primary):
    with primary.client() as c:
        c.shop.a.insert_one({"_id": 0})
        with c.shop.watch(max_await_time_ms=200) as dbs, c.watch(max_await_time_ms=200) as all_:
            c.shop.a.insert_one({"_id": 1})
            c.shop.b.insert_one({"_id": 2})
            c.other.c.insert_one({"_id": 3})
            c.drop_database("shop")
            got = take(dbs, 5)
            kinds = [(e["operationType"], e.get("ns")) for e in got]
            assert kinds[:2] == [
                ("insert", {"db": "shop", "coll": "a"}),
                ("insert", {"db": "shop", "coll": "b"}),
            ]
            assert sorted(k[1]["coll"] for k in kinds[2:4]) == ["a", "b"]
            assert {k[0] for k in kinds[2:4]} == {"drop"}
            assert kinds[4] == ("dropDatabase", {"db": "shop"})
            (inv,) = take(dbs, 1)
            assert inv["operationType"] == "invalidate"
            everything = take(all_, 6)
            seen = [(e["operationType"], e["ns"].get("db")) for e in everything]
            assert ("insert", "other") in seen and ("dropDatabase", "shop") in seen
            # The deployment stream is not invalidated by a database's drop.
            c.later.x.insert_one({"_id": 4})
            (more,) = take(all_, 1)
            assert more["ns"] == {"db": "later", "coll": "x"}


def test_transaction_events_are_unwound_in_order_with_the_session(primary):
    with primary.client() as c:
        coll = c.app.t
        coll.insert_one({"_id": 0})
        with coll.watch(max_await_time_ms=200) as s:
            with c.start_session() as session:
                with session.start_transaction():
                    coll.insert_one({"_id": 1}, session=session)
                    coll.update_one({"_id": 0}, {"$set": {"v": 1}}, session=session)
                    coll.delete_one({"_id": 1}, session=session)
                sid = session.session_id
            got = take(s, 3)
        assert [e["operationType"] for e in got] == ["insert", "update", "delete"]
        assert len({e["clusterTime"] for e in got}) == 1
        for e in got:
            assert e["lsid"]["id"] == sid["id"]
            assert e["txnNumber"] == 1
        tokens = [e["_id"]["_data"] for e in got]
        assert tokens == sorted(tokens) and len(set(tokens)) == 3


def test_update_lookup_and_images(primary):
    with primary.client() as c:
        coll = c.app.look
        coll.insert_one({"_id": 1, "n": 0})
        with coll.watch(full_document="updateLookup", max_await_time_ms=200) as s:
            coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
            (e,) = take(s, 1)
        assert e["fullDocument"] == {"_id": 1, "n": 1}
        with coll.watch(full_document="whenAvailable", max_await_time_ms=200) as s:
            coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
            (e,) = take(s, 1)
        # The collection keeps no pre- and post-images (changeStreamPreAndPostImages off).
        assert e["fullDocument"] is None
        with coll.watch(full_document="required", max_await_time_ms=200) as s:
            coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
            with pytest.raises(OperationFailure) as err:
                take(s, 1)
        assert err.value.code == 47
        with pytest.raises(OperationFailure) as err:
            coll.watch(full_document="sometimes")
        assert err.value.code == 2


def test_resume_after_a_token_and_across_a_restart(tmp_path):
    srv = start_member(tmp_path / "data")
    try:
        with srv.client() as c:
            coll = c.app.r
            with coll.watch(max_await_time_ms=200) as s:
                coll.insert_many([{"_id": i} for i in range(5)])
                got = take(s, 5)
            with coll.watch(resume_after=got[1]["_id"], max_await_time_ms=200) as s:
                assert [e["documentKey"]["_id"] for e in take(s, 3)] == [2, 3, 4]
            token = got[4]["_id"]
        port = srv.port
        srv.stop()
        # The set's config names this host and port: the member restarts on it.
        srv = Server(tmp_path / "data", port=port, args=["--replSet", SET])
        with srv.client() as c:
            deadline = time.monotonic() + 10
            while not c.admin.command("hello").get("isWritablePrimary"):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            coll = c.app.r
            coll.insert_one({"_id": "after restart"})
            with coll.watch(resume_after=token, max_await_time_ms=200) as s:
                (e,) = take(s, 1)
                assert e["documentKey"] == {"_id": "after restart"}
    finally:
        srv.stop()


def test_start_at_operation_time(primary):
    with primary.client() as c:
        coll = c.app.at
        coll.insert_one({"_id": "before"})
        op_time = c.admin.command("hello")["lastWrite"]["opTime"]["ts"]
        coll.insert_one({"_id": "after"})
        with coll.watch(start_at_operation_time=op_time, max_await_time_ms=200) as s:
            ids = [e["documentKey"]["_id"] for e in take(s, 2)]
        assert ids == ["before", "after"]


def test_post_batch_resume_token_moves_when_nothing_matches(primary):
    with primary.client() as c:
        db = c.app
        db.quiet.insert_one({"_id": 0})
        first = db.command("aggregate", "quiet", pipeline=[{"$changeStream": {}}], cursor={})
        cursor = first["cursor"]
        assert cursor["firstBatch"] == [] and "postBatchResumeToken" in cursor
        before = cursor["postBatchResumeToken"]["_data"]
        db.noisy.insert_many([{"_id": i} for i in range(3)])
        more = db.command("getMore", cursor["id"], collection="quiet", maxTimeMS=100)
        after = more["cursor"]["postBatchResumeToken"]["_data"]
        assert more["cursor"]["nextBatch"] == []
        assert after > before
        # Resuming from it sees only what came later.
        with db.quiet.watch(resume_after={"_data": after}, max_await_time_ms=200) as s:
            db.quiet.insert_one({"_id": "new"})
            (e,) = take(s, 1)
            assert e["documentKey"] == {"_id": "new"}
            assert s.resume_token["_data"] > after
        db.command("killCursors", "quiet", cursors=[cursor["id"]])


def test_get_more_waits_for_events(primary):
    with primary.client() as c:
        coll = c.app.wait
        with coll.watch(max_await_time_ms=3000) as s:
            def later():
                time.sleep(0.5)
                with primary.client() as w:
                    w.app.wait.insert_one({"_id": 1})

            t = threading.Thread(target=later)
            started = time.monotonic()
            t.start()
            e = s.try_next()
            waited = time.monotonic() - started
            t.join()
        assert e is not None and e["documentKey"] == {"_id": 1}
        assert 0.3 < waited < 2.9
        with coll.watch(max_await_time_ms=300) as s:
            started = time.monotonic()
            assert s.try_next() is None
            assert time.monotonic() - started >= 0.25


def test_later_stages(primary):
    with primary.client() as c:
        coll = c.app.stages
        pipeline = [
            {"$match": {"operationType": "insert", "fullDocument.keep": True}},
            {"$project": {"fullDocument": 1, "operationType": 1}},
            {"$addFields": {"tag": "x"}},
        ]
        with coll.watch(pipeline, max_await_time_ms=200) as s:
            coll.insert_many([{"_id": 1, "keep": False}, {"_id": 2, "keep": True}])
            (e,) = take(s, 1)
        assert e["fullDocument"] == {"_id": 2, "keep": True}
        assert set(e) == {"_id", "operationType", "fullDocument", "tag"}
        # `$redact` may follow `$changeStream` (mongod 7.0's list of allowed stages).
        redact = {"$redact": {"$cond": [{"$eq": ["$operationType", "insert"]}, "$$KEEP",
                                        "$$PRUNE"]}}
        with coll.watch([redact], max_await_time_ms=200) as s:
            coll.insert_one({"_id": 4})
            (e,) = take(s, 1)
        assert e["documentKey"] == {"_id": 4}
        with coll.watch([{"$project": {"_id": 0}}], max_await_time_ms=200) as s:
            coll.insert_one({"_id": 3})
            with pytest.raises(OperationFailure) as err:
                take(s, 1)
        assert err.value.code == 280
        cs = {"$changeStream": {}}
        for pipeline, code in [
            ([cs, {"$group": {"_id": None}}], 20),
            ([{"$match": {}}, cs], 40602),
        ]:
            with pytest.raises(OperationFailure) as err:
                c.app.command("aggregate", "stages", pipeline=pipeline, cursor={})
            if code is not None:
                assert err.value.code == code
        with pytest.raises(OperationFailure) as err:
            c.app.command("aggregate", 1, pipeline=[{"$changeStream": {"allChangesForCluster": True}}], cursor={})
        assert err.value.code == 72
        with pytest.raises(OperationFailure) as err:
            c.local.command("aggregate", 1, pipeline=[{"$changeStream": {}}], cursor={})
        assert err.value.code == 73


def test_history_lost_after_truncation(tmp_path):
    srv = start_member(tmp_path / "data", ["--oplogSize", "1"])
    try:
        with srv.client() as c:
            coll = c.app.h
            with coll.watch(max_await_time_ms=200) as s:
                coll.insert_one({"_id": "first"})
                (e,) = take(s, 1)
            token = e["_id"]
            pad = "x" * 10_000
            for i in range(300):
                coll.insert_one({"_id": i, "pad": pad})
            with pytest.raises(OperationFailure) as err:
                coll.watch(resume_after=token)
            assert err.value.code == 286
            with pytest.raises(OperationFailure) as err:
                coll.watch(start_at_operation_time=Timestamp(1, 1))
            assert err.value.code == 286
    finally:
        srv.stop()


def test_standalone_refuses(server):
    with server.client() as c:
        with pytest.raises(OperationFailure) as err:
            c.app.x.watch()
        assert err.value.code == 40573


def test_expanded_events_report_ddl(primary):
    with primary.client() as c:
        db = c.app
        db.exp.insert_one({"_id": 1, "a": {"1": 1}})
        with db.watch(show_expanded_events=True, max_await_time_ms=200) as s:
            db.exp.create_index("x", name="x_1")
            db.exp.drop_index("x_1")
            db.command("collMod", "exp")
            db.exp.update_one({"_id": 1}, {"$set": {"a.1": 2}})
            db.create_collection("v", viewOn="exp", pipeline=[])
            db.drop_collection("v")
            got = take(s, 6)
        assert [e["operationType"] for e in got] == [
            "createIndexes",
            "dropIndexes",
            "modify",
            "update",
            "create",
            "drop",
        ]
        assert got[0]["operationDescription"]["indexes"][0]["name"] == "x_1"
        assert got[0]["ns"] == {"db": "app", "coll": "exp"}
        assert "collectionUUID" in got[0]
        assert got[3]["updateDescription"]["disambiguatedPaths"] == {"a.1": ["a", "1"]}
        assert got[4]["ns"] == {"db": "app", "coll": "v"}
        assert got[4]["operationDescription"] == {"viewOn": "exp", "pipeline": []}
        # Without the option none of that DDL is reported.
        with db.watch(max_await_time_ms=200) as s:
            db.exp.create_index("y")
            db.exp.insert_one({"_id": 2})
            (e,) = take(s, 1)
            assert e["operationType"] == "insert" and "collectionUUID" not in e


def test_get_more_errors_carry_change_stream_labels(tmp_path):
    srv = Server(
        tmp_path / "data",
        args=["--replSet", SET, "--setParameter", "enableTestCommands=1"],
    )
    try:
        with srv.client() as c:
            c.admin.command("replSetInitiate")
            deadline = time.monotonic() + 10
            while not c.admin.command("hello").get("isWritablePrimary"):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            db = c.app
            first = db.command("aggregate", "l", pipeline=[{"$changeStream": {}}], cursor={})
            c.admin.command(
                "configureFailPoint",
                "failGetMoreAfterCursorCheckout",
                mode={"times": 1},
                data={"errorCode": 262},
            )
            with pytest.raises(OperationFailure) as err:
                db.command("getMore", first["cursor"]["id"], collection="l")
            assert err.value.code == 262
            assert "ResumableChangeStreamError" in err.value.details["errorLabels"]
            # pymongo resumes after it on its own.
            with db.l.watch(max_await_time_ms=200) as s:
                c.admin.command(
                    "configureFailPoint",
                    "failGetMoreAfterCursorCheckout",
                    mode={"times": 1},
                    data={"errorCode": 262},
                )
                db.l.insert_one({"_id": 1})
                (e,) = take(s, 1)
                assert e["documentKey"] == {"_id": 1}
            with db.l.watch([{"$project": {"_id": 0}}], max_await_time_ms=200) as s:
                db.l.insert_one({"_id": 2})
                with pytest.raises(OperationFailure) as err:
                    take(s, 1)
            assert "NonResumableChangeStreamError" in err.value.details["errorLabels"]
    finally:
        srv.stop()


def test_out_and_implicit_creates_report_their_ddl(primary):
    """`$out` logs its temporary collection's `create` (with `temp: true`) and indexes, its
    inserts, and one `renameCollection` over the target naming the dropped target's UUID, as
    mongod does; `createIndexes` on a missing collection logs its implicit `create` first.
    The streams show what those entries make."""
    with primary.client() as c:
        db = c.outs
        db.src.insert_many([{"_id": 0}, {"_id": 1}])
        db.target.insert_one({"_id": "old"})
        db.target.create_index("x", name="x_1")
        old_uuid = db.command("listCollections", filter={"name": "target"})["cursor"][
            "firstBatch"
        ][0]["info"]["uuid"]
        start = c.local["oplog.rs"].find().sort("$natural", -1).limit(1).next()["ts"]
        with db.watch(show_expanded_events=True, max_await_time_ms=200) as s, db.target.watch(
            max_await_time_ms=200
        ) as t:
            list(db.src.aggregate([{"$out": "target"}]))
            db.fresh.create_index("y", name="y_1")
            got = take(s, 7)
            ren, inv = take(t, 2)
        kinds = [(e["operationType"], e["ns"]["coll"]) for e in got]
        tmp = kinds[0][1]
        assert tmp.startswith("tmp.agg_out."), kinds
        assert kinds == [
            ("create", tmp),
            ("createIndexes", tmp),
            ("insert", tmp),
            ("insert", tmp),
            ("rename", tmp),
            ("create", "fresh"),
            ("createIndexes", "fresh"),
        ]
        assert got[1]["operationDescription"]["indexes"][0]["name"] == "x_1"
        assert got[4]["to"] == {"db": "outs", "coll": "target"}
        assert got[4]["operationDescription"]["dropTarget"] == old_uuid
        assert got[6]["operationDescription"]["indexes"][0]["name"] == "y_1"
        # The target's own stream: the rename over it, then its end.
        assert ren["operationType"] == "rename" and ren["ns"]["coll"] == tmp
        assert ren["to"] == {"db": "outs", "coll": "target"}
        assert inv["operationType"] == "invalidate"
        ddl = [
            e["o"]
            for e in c.local["oplog.rs"].find({"ts": {"$gt": start}, "op": "c"}).sort("$natural", 1)
        ]
        assert ddl[0]["create"] == tmp and ddl[0]["temp"] is True
        assert ddl[2] == {
            "renameCollection": f"outs.{tmp}",
            "to": "outs.target",
            "stayTemp": False,
            "dropTarget": old_uuid,
        }
        assert [next(iter(o)) for o in ddl[3:]] == ["create", "createIndexes"]
        assert sorted(db.list_collection_names()) == ["fresh", "src", "target"]
