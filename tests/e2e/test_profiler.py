"""The database profiler (`profile`, mongosh's `db.setProfilingLevel()` /
`db.getProfilingStatus()`): level 2 writes every command's `system.profile` entry in mongod's
shape, level 1 only the slow ones (or a filter's matches), level 0 none; the collection stays
bounded near mongod's 1 MiB."""

import pytest
from pymongo.errors import OperationFailure

SLOW = {"$expr": {"$lt": [{"$add": ["$x"] + list(range(3000))}, -1]}}


def entries(db, **filt):
    return list(db.system.profile.find(filt).sort("ts", 1))


def test_status_reads_and_sets_the_levels(client):
    db = client.profdb
    assert db.command("profile", -1) == {"was": 0, "slowms": 100, "sampleRate": 1.0, "ok": 1.0}
    before = db.command("profile", 1, slowms=20, sampleRate=0.5)
    assert before["was"] == 0 and before["slowms"] == 100
    now = db.command("profile", -1)
    assert (now["was"], now["slowms"], now["sampleRate"]) == (1, 20, 0.5)
    # slowms and sampleRate are the server's, the level each database's own.
    assert client.otherdb.command("profile", -1)["was"] == 0
    assert client.otherdb.command("profile", -1)["slowms"] == 20
    db.command("profile", 0, slowms=100, sampleRate=1.0)


def test_level_two_writes_every_command_in_mongods_shape(client):
    db = client.profdb2
    db.c.insert_many([{"_id": i, "a": i % 3} for i in range(10)])
    db.c.create_index("a")
    db.command("profile", 2)
    assert len(db.c.find({"a": 1}).to_list()) == 3
    db.c.update_many({"a": 2}, {"$set": {"b": 1}})
    db.c.delete_one({"_id": 0})
    db.c.insert_one({"_id": 99})
    db.command("profile", 0)
    found = entries(db, op="query")
    assert len(found) == 1
    e = found[0]
    assert e["ns"] == "profdb2.c"
    assert e["command"]["find"] == "c" and e["command"]["filter"] == {"a": 1}
    assert e["nreturned"] == 3
    assert e["keysExamined"] == 3 and e["docsExamined"] == 3
    assert isinstance(e["millis"], int) and e["millis"] >= 0
    assert e["client"] == "127.0.0.1"
    assert e["user"] == "" and e["allUsers"] == []
    assert "ts" in e and e["protocol"] == "op_msg" and e["responseLength"] > 0
    upd = entries(db, op="update")[0]
    assert (upd["nMatched"], upd["nModified"]) == (3, 3)
    assert entries(db, op="remove")[0]["ndeleted"] == 1
    assert entries(db, op="insert")[0]["ninserted"] == 1
    before = db.system.profile.count_documents({})
    db.c.find_one({"_id": 1})
    assert db.system.profile.count_documents({}) == before, "level 0 writes nothing"


def test_level_one_writes_only_slow_commands(client):
    db = client.profdb3
    db.c.insert_many([{"_id": i, "x": i} for i in range(3000)])
    db.command("profile", 1, slowms=50)
    for i in range(20):
        db.c.find_one({"_id": i})
    list(db.c.find(SLOW))
    db.command("profile", 0, slowms=100)
    found = entries(db)
    assert [e["op"] for e in found] == ["query"]
    assert found[0]["command"]["filter"] == SLOW
    assert found[0]["millis"] >= 50
    assert found[0]["docsExamined"] == 3000 and found[0]["nreturned"] == 0


def test_level_one_with_a_filter_takes_its_matches(client):
    db = client.profdb4
    db.c.insert_many([{"_id": i} for i in range(5)])
    reply = db.command("profile", 1, filter={"op": "remove"})
    assert "note" in reply
    db.c.find_one({"_id": 1})
    db.c.delete_one({"_id": 1})
    status = db.command("profile", -1)
    assert status["filter"] == {"op": "remove"}
    db.command("profile", 0, filter="unset")
    assert [e["op"] for e in entries(db)] == ["remove"]
    assert "filter" not in db.command("profile", -1)


def test_system_profile_stays_bounded(client):
    db = client.profdb5
    db.c.insert_one({"_id": 0, "pad": "x" * 20000})
    db.command("profile", 2)
    for _ in range(120):
        db.c.find_one({"_id": 0, "pad": "x" * 20000})
    db.command("profile", 0)
    size = sum(len(str(e)) for e in entries(db))
    assert db.system.profile.count_documents({}) < 120
    assert size < 1.3 * (1 << 20)


def test_bad_arguments_are_refused_as_mongod_refuses_them(client):
    db = client.profdb6
    for args, code in [
        ({"sampleRate": 2.0}, 2),
        ({"filter": 5}, 2),
        ({"nope": 1}, 40415),
        ({"filter": {"$bogus": 1}}, 2),
    ]:
        with pytest.raises(OperationFailure) as e:
            db.command("profile", 1, **args)
        assert e.value.code == code, args
    assert db.command("profile", -1)["was"] == 0, "nothing changed"
