"""`local.oplog.rs` on a `--replSet` member (issue 24 item 5, docs/design-oplog.md): every
write to a user collection leaves its entry in mongod's format, a transaction one
`applyOps`, DDL `c` entries; the oplog reads in `$natural` order, is listed as capped,
refuses user writes, and serves tailable awaitData cursors that see new entries in order."""

import threading
import time

import pytest
from bson import Timestamp
from pymongo import CursorType
from pymongo.errors import WriteError

from conftest import Server

SET = "rs0"


def entries_after(c, ts):
    return list(c.local["oplog.rs"].find({"ts": {"$gt": ts}}).sort("$natural", 1))


def try_next(cur):
    try:
        return cur.next()
    except StopIteration:
        return None


def last_ts(c):
    return c.local["oplog.rs"].find().sort("$natural", -1).limit(1).next()["ts"]


def test_each_write_kind_has_its_entry(primary):
    with primary.client() as c:
        coll = c.app.items
        coll.insert_one({"_id": 0})
        start = last_ts(c)
        coll.insert_many([{"_id": 1, "a": 1}, {"_id": 2, "a": 2}])
        coll.update_one({"_id": 1}, {"$set": {"a": 10}})
        coll.delete_one({"_id": 2})
        coll.find_one_and_update({"_id": 1}, {"$inc": {"a": 1}})
        got = entries_after(c, start)
        assert [(e["op"], e["ns"]) for e in got] == [
            ("i", "app.items"),
            ("i", "app.items"),
            ("u", "app.items"),
            ("d", "app.items"),
            ("u", "app.items"),
        ]
        ins = got[0]
        assert ins["o"] == {"_id": 1, "a": 1} and ins["o2"] == {"_id": 1}
        assert ins["v"] == 2 and isinstance(ins["t"], int) and "wall" in ins
        assert ins["ui"].subtype == 4
        assert got[2]["o"] == {"$v": 2, "diff": {"u": {"a": 10}}}
        assert got[2]["o2"] == {"_id": 1}
        assert got[3]["o"] == {"_id": 2}
        stamps = [e["ts"] for e in got]
        assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
        # hello's lastWrite is the newest entry.
        assert c.admin.command("hello")["lastWrite"]["opTime"]["ts"] == stamps[-1]


def test_retryable_writes_carry_their_session(primary):
    with primary.client(retryWrites=True) as c:
        start = last_ts(c)
        with c.start_session() as s:
            c.app.r.insert_one({"_id": 1}, session=s)
            c.app.r.insert_one({"_id": 2}, session=s)
            sid = s.session_id["id"]
        got = [e for e in entries_after(c, start) if e["op"] == "i"]
        assert len(got) == 2
        for e in got:
            assert e["lsid"]["id"] == sid
            assert isinstance(e["txnNumber"], int) and e["stmtId"] == 0
            assert set(e["prevOpTime"]) == {"ts", "t"}


def test_a_transaction_is_one_apply_ops_entry_and_an_abort_leaves_none(primary):
    with primary.client() as c:
        c.app.t.insert_one({"_id": 0})
        start = last_ts(c)
        with c.start_session() as s:
            with s.start_transaction():
                c.app.t.insert_one({"_id": 1}, session=s)
                c.app.t.update_one({"_id": 0}, {"$set": {"x": 1}}, session=s)
            s.start_transaction()
            c.app.t.insert_one({"_id": 99}, session=s)
            s.abort_transaction()
            sid = s.session_id["id"]
        got = entries_after(c, start)
        assert len(got) == 1
        e = got[0]
        assert (e["op"], e["ns"]) == ("c", "admin.$cmd")
        ops = e["o"]["applyOps"]
        assert [(o["op"], o["ns"]) for o in ops] == [("i", "app.t"), ("u", "app.t")]
        assert e["lsid"]["id"] == sid and "stmtId" not in e
        assert not any(o["o"].get("_id") == 99 for o in ops)


def test_ddl_writes_command_entries(primary):
    with primary.client() as c:
        start = last_ts(c)
        c.app.create_collection("d1")
        c.app.d1.create_index("a")
        c.app.d1.drop_index("a_1")
        c.app.d1.rename("d2")
        c.app.d2.drop()
        got = [e for e in entries_after(c, start) if e["op"] == "c"]
        assert [next(iter(e["o"])) for e in got] == [
            "create",
            "createIndexes",
            "dropIndexes",
            "renameCollection",
            "drop",
        ]
        assert all(e["ns"] == "app.$cmd" for e in got)


def test_the_oplog_is_capped_and_refuses_user_writes(primary):
    with primary.client() as c:
        info = [x for x in c.local.list_collections() if x["name"] == "oplog.rs"]
        assert info and info[0]["options"]["capped"] is True
        assert info[0]["options"]["size"] > 0
        with pytest.raises(WriteError) as e:
            c.local["oplog.rs"].insert_one({"op": "n"})
        assert e.value.code == 73


def test_a_tailable_await_data_cursor_sees_new_entries_in_order(primary):
    with primary.client() as c:
        start = last_ts(c)
        cur = c.local["oplog.rs"].find(
            {"ts": {"$gt": start}}, cursor_type=CursorType.TAILABLE_AWAIT
        ).max_await_time_ms(2000)

        def writers(k):
            with primary.client() as w:
                for i in range(25):
                    w.app.tail.insert_one({"_id": f"{k}-{i}"})

        threads = [threading.Thread(target=writers, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        seen = []
        deadline = time.monotonic() + 30
        while len(seen) < 100 and time.monotonic() < deadline and cur.alive:
            for e in cur:
                if e["op"] == "i" and e["ns"] == "app.tail":
                    seen.append(e)
        for t in threads:
            t.join()
        assert len(seen) == 100
        stamps = [e["ts"] for e in seen]
        assert stamps == sorted(stamps)
        assert len({e["o"]["_id"] for e in seen}) == 100


def test_an_await_data_get_more_waits_for_max_time(primary):
    with primary.client() as c:
        start = last_ts(c)
        cur = c.local["oplog.rs"].find(
            {"ts": {"$gt": start}}, cursor_type=CursorType.TAILABLE_AWAIT
        ).max_await_time_ms(300)
        assert try_next(cur) is None  # the find: an empty first batch at once
        assert cur.alive
        t0 = time.monotonic()
        assert try_next(cur) is None  # a getMore: waits maxTimeMS
        assert time.monotonic() - t0 >= 0.25
        assert cur.alive
        c.app.w.insert_one({"_id": 1})
        got = None
        deadline = time.monotonic() + 5
        while (got is None or got["op"] != "i") and time.monotonic() < deadline:
            got = try_next(cur)
        assert got is not None and got["o"] == {"_id": 1}


def test_a_small_oplog_stays_near_its_bound(tmp_path):
    srv = Server(tmp_path / "data", args=["--replSet", SET, "--oplogSize", "1"])
    try:
        with srv.client() as c:
            c.admin.command("replSetInitiate")
            pad = "x" * 1000
            for i in range(30):
                c.app.big.insert_many([{"_id": i * 100 + j, "p": pad} for j in range(100)])
            stats = c.local.command("collStats", "oplog.rs")
            assert stats["size"] <= (1 << 20) + (1 << 20) // 4
            first = c.local["oplog.rs"].find().sort("$natural", 1).limit(1).next()
            assert first["ts"] > Timestamp(0, 0)
            assert c.app.big.count_documents({}) == 3000
    finally:
        srv.stop()


def test_a_standalone_has_no_oplog(client):
    client.app.x.insert_one({"_id": 1})
    assert "oplog.rs" not in client.local.list_collection_names()


def test_profiler_output_is_not_replicated(primary):
    # mongod keeps system.profile per member: the profiler's writes leave no oplog entry.
    with primary.client() as c:
        c.app.command("profile", 2)
        start = last_ts(c)
        c.app.items.insert_one({"_id": "profiled"})
        c.app.command("profile", 0)
        assert c.app["system.profile"].count_documents({}) > 0
        nss = {e["ns"] for e in entries_after(c, start)}
        assert "app.items" in nss
        assert "app.system.profile" not in nss


def test_a_transaction_past_one_entrys_16_mib_is_refused_whole(primary):
    """A transaction is one applyOps entry (no partialTxn chain): past a document's 16 MiB
    its commit fails with TransactionTooLarge (257, mongod 4.0's answer) and nothing of it
    is written, in the collection or the oplog; one under the limit commits."""
    from pymongo.errors import OperationFailure

    pad = "x" * (1 << 20)
    with primary.client() as c:
        c.app.big.insert_one({"_id": -1})
        start = last_ts(c)
        with c.start_session() as s:
            s.start_transaction()
            for i in range(17):
                c.app.big.insert_one({"_id": i, "pad": pad}, session=s)
            with pytest.raises(OperationFailure) as e:
                s.commit_transaction()
            assert (e.value.code, e.value.details["codeName"]) == (257, "TransactionTooLarge")
        assert c.app.big.count_documents({}) == 1
        assert entries_after(c, start) == []
        with c.start_session() as s:
            with s.start_transaction():
                for i in range(10):
                    c.app.big.insert_one({"_id": i, "pad": pad}, session=s)
        assert c.app.big.count_documents({}) == 11
        assert [e["op"] for e in entries_after(c, start)] == ["c"]


def test_the_oplog_size_comes_from_the_flag_or_the_file_at_every_start(tmp_path):
    """`--oplogSize` or `replication.oplogSizeMB` (the flag wins) is the bound in effect at
    each start, and `listCollections` shows that bound as the oplog's `size`."""

    def listed_size(srv):
        with srv.client() as c:
            (info,) = c.local.list_collections(filter={"name": "oplog.rs"})
            return info["options"]["size"]

    data = tmp_path / "data"
    srv = Server(data, args=["--replSet", SET, "--oplogSize", "3"])
    try:
        with srv.client() as c:
            c.admin.command("replSetInitiate")
        assert listed_size(srv) == 3 << 20
    finally:
        srv.stop()
    conf = tmp_path / "shale.yaml"
    conf.write_text(f"replication:\n  replSetName: {SET}\n  oplogSizeMB: 2\n")
    srv = Server(data, args=["--config", str(conf)])
    try:
        assert listed_size(srv) == 2 << 20
        with srv.client() as c:
            opts = c.admin.command("getCmdLineOpts")["parsed"]
            assert opts["replication"]["oplogSizeMB"] == 2
    finally:
        srv.stop()
    srv = Server(data, args=["--config", str(conf), "--oplogSize", "5"])
    try:
        assert listed_size(srv) == 5 << 20
    finally:
        srv.stop()
