"""The commands the database tools send, replayed in their documented shapes (issue 26
item 2): mongorestore's `create` with the dumped `idIndex`, and the `serverStatus` sections
mongostat reads."""

import pytest
from pymongo.errors import OperationFailure


def test_mongorestore_create_with_id_index(db):
    # mongorestore: create with the dump's options and _id index spec, then insert.
    db.command(
        {
            "create": "restored",
            "idIndex": {"key": {"_id": 1}, "name": "_id_", "v": 2},
            "indexOptionDefaults": {"storageEngine": {}},
        }
    )
    db.restored.insert_many([{"_id": i} for i in range(3)])
    assert db.restored.count_documents({}) == 3
    # Older dumps name the namespace in the spec; mongod 7.0 accepts it.
    db.command({"create": "old", "idIndex": {"key": {"_id": 1}, "name": "_id_", "ns": "x.old", "v": 1}})
    db.command({"create": "flagged", "autoIndexId": True, "flags": 1})


def test_a_bad_id_index_is_refused(db):
    with pytest.raises(OperationFailure) as e:
        db.command({"create": "bad", "idIndex": {"key": {"a": 1}, "name": "_id_"}})
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        db.command({"create": "bad", "autoIndexId": False})
    assert e.value.code == 50001  # as mongod 7.0, outside `local` (test_create_options.py)


def test_mongostat_server_status(db, shared_client):
    admin = shared_client.admin
    # mongostat's poll: serverStatus with recordStats off, read twice to compute rates.
    before = admin.command({"serverStatus": 1, "recordStats": 0})
    db.stat.insert_many([{"_id": i} for i in range(5)])
    assert len(list(db.stat.find({}))) == 5
    db.stat.update_many({}, {"$set": {"x": 1}})
    db.stat.delete_one({"_id": 0})
    after = admin.command({"serverStatus": 1, "recordStats": 0})
    for key in ("insert", "query", "update", "delete", "getmore", "command"):
        assert isinstance(after["opcounters"][key], int)
        assert after["opcountersRepl"][key] == 0
    ops = lambda s, k: s["opcounters"][k]
    assert ops(after, "insert") - ops(before, "insert") >= 5
    assert ops(after, "query") > ops(before, "query")
    assert ops(after, "update") > ops(before, "update")
    assert ops(after, "delete") > ops(before, "delete")
    assert ops(after, "command") > ops(before, "command")
    docs = lambda s, k: s["metrics"]["document"][k]
    assert docs(after, "inserted") - docs(before, "inserted") >= 5
    assert docs(after, "returned") - docs(before, "returned") >= 5
    assert docs(after, "updated") - docs(before, "updated") >= 5
    assert docs(after, "deleted") - docs(before, "deleted") >= 1
    mem = after["mem"]
    assert mem["supported"] and mem["bits"] == 64 and mem["resident"] > 0 and mem["virtual"] >= mem["resident"]
    assert after["connections"]["current"] >= 1
    assert after["network"]["bytesIn"] > before["network"]["bytesIn"]
    assert after["uptimeMillis"] >= before["uptimeMillis"] and after["localTime"]
    assert {"regular", "warning", "msg", "user", "rollovers"} <= set(after["asserts"])
    assert after["metrics"]["cursor"]["open"]["total"] >= 0
    assert "timedOut" in after["metrics"]["cursor"]
