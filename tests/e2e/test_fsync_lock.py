"""`fsync` and `fsyncUnlock` (mongosh's `db.fsyncLock()` / `db.fsyncUnlock()`): a plain
fsync checkpoints; `lock: true` checkpoints and holds writes — they wait, they are not
refused — until the last unlock; `lockCount` nests; `currentOp` says `fsyncLock`."""

import threading
import time

import pytest
from pymongo.errors import OperationFailure


def test_plain_fsync_checkpoints(client):
    before = client.admin.command("serverStatus")["shale"]["engine"]["checkpoints"]
    assert client.admin.command("fsync")["numFiles"] == 1
    after = client.admin.command("serverStatus")["shale"]["engine"]["checkpoints"]
    assert after > before


def test_fsync_lock_holds_an_insert_until_unlock(server, client):
    coll = client.fsyncdb.c
    coll.insert_one({"_id": 0})
    reply = client.admin.command("fsync", lock=True)
    assert reply["lockCount"] == 1
    assert reply["info"].startswith("now locked against writes")
    assert client.admin.command("currentOp")["fsyncLock"] is True
    writer = server.client()
    done = {}

    def insert():
        writer.fsyncdb.c.insert_one({"_id": 1})
        done["at"] = time.monotonic()

    t = threading.Thread(target=insert)
    t.start()
    time.sleep(1.0)
    assert t.is_alive() and "at" not in done, "the insert is held"
    # Reads go on meanwhile.
    assert coll.find_one({"_id": 0}) == {"_id": 0}
    assert coll.count_documents({}) == 1
    unlocked_at = time.monotonic()
    reply = client.admin.command("fsyncUnlock")
    assert reply == {"info": "fsyncUnlock completed", "lockCount": 0, "ok": 1.0}
    t.join(10)
    assert done["at"] >= unlocked_at
    assert coll.count_documents({}) == 2
    assert "fsyncLock" not in client.admin.command("currentOp")
    writer.close()


def test_locks_nest_and_unlocking_past_zero_is_refused(client):
    assert client.admin.command("fsync", lock=True)["lockCount"] == 1
    assert client.admin.command("fsync", lock=True)["lockCount"] == 2
    assert client.admin.command("fsyncUnlock")["lockCount"] == 1
    assert client.admin.command("fsyncUnlock")["lockCount"] == 0
    with pytest.raises(OperationFailure) as e:
        client.admin.command("fsyncUnlock")
    assert e.value.code == 20 and "not locked" in str(e.value)
    client.fsyncdb.c.insert_one({"after": True})


def test_a_held_write_can_be_killed(server, client):
    client.admin.command("fsync", lock=True)
    writer = server.client()
    box = {}

    def insert():
        try:
            writer.fsyncdb.k.insert_one({"_id": 1})
        except OperationFailure as e:
            box["error"] = e

    t = threading.Thread(target=insert)
    t.start()
    deadline = time.monotonic() + 10
    op = None
    while op is None and time.monotonic() < deadline:
        ops = client.admin.command({"currentOp": 1, "op": "insert", "ns": "fsyncdb.k"})
        op = (ops["inprog"] or [None])[0]
    assert op is not None
    client.admin.command("killOp", op=op["opid"])
    t.join(10)
    assert box["error"].code == 11601
    client.admin.command("fsyncUnlock")
    assert client.fsyncdb.k.count_documents({}) == 0
    writer.close()


def test_fsync_runs_only_on_admin(client):
    for name in ["fsync", "fsyncUnlock"]:
        with pytest.raises(OperationFailure) as e:
            client.fsyncdb.command(name)
        assert e.value.code == 13
    with pytest.raises(OperationFailure) as e:
        client.admin.command("fsync", **{"async": True})
    assert e.value.code == 20
