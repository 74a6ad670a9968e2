"""Fast updates (TokuMX 2.0's read-free updates) through pymongo: `--setParameter
fastUpdates=true` and the run-time `setParameter`/`getParameter`; an eligible update by `_id`
is sent as a message (counted in `serverStatus.shale.fastUpdates.sent`) and reports TokuMX's
counts (matched and modified: 1, even for a missing document, which it does not create);
ineligible updates (an indexed field, `_id`, upsert, multi, positional, a clustering index,
findAndModify, a session transaction) take the read-modify-write path with exact counts; the
results equal the same updates run with the switch off; and a kill -9 and restart keep the
fast-updated values (the log replays the messages)."""

import signal

import pytest
from pymongo import ReturnDocument

from conftest import Server


def sent(client) -> int:
    return client.admin.command("serverStatus")["shale"]["fastUpdates"]["sent"]


def apply_mix(coll):
    """The same eligible updates, whatever path they take."""
    for i in range(20):
        coll.update_one({"_id": i}, {"$inc": {"n": i, "m": 1}})
        coll.update_one({"_id": i}, {"$set": {"s.t": i * 2}, "$max": {"hi": i}})
        coll.update_one({"_id": i}, {"$min": {"lo": -i}, "$mul": {"n": 3}})
        coll.update_one({"_id": i}, {"$unset": {"gone": 1}, "$push": {"l": i}})
        coll.update_one({"_id": i}, {"$rename": {"r": "r2"}})


def seed(coll):
    coll.insert_many([{"_id": i, "n": 1, "gone": True, "r": i, "k": i} for i in range(20)])


@pytest.fixture
def fast_server(tmp_path):
    srv = Server(tmp_path / "data", args=["--setParameter", "fastUpdates=true"])
    yield srv
    srv.stop()


def test_the_parameter_is_off_by_default_and_settable(client):
    got = client.admin.command("getParameter", 1, fastUpdates=1)
    assert got["fastUpdates"] is False
    was = client.admin.command("setParameter", 1, fastUpdates=True)
    assert was["was"] is False
    assert client.admin.command("getParameter", 1, fastUpdates=1)["fastUpdates"] is True
    # TokuMX's spelling names the same switch.
    assert client.admin.command("getParameter", 1, fastupdates=1)["fastupdates"] is True
    client.admin.command("setParameter", 1, fastupdates=False)
    assert client.admin.command("getParameter", 1, fastUpdates=1)["fastUpdates"] is False


def test_startup_parameter_turns_it_on(fast_server):
    c = fast_server.client()
    assert c.admin.command("getParameter", 1, fastUpdates=1)["fastUpdates"] is True
    c.close()


def test_results_equal_the_read_modify_write_path(client):
    slow, fast = client.t.slow, client.t.fast
    seed(slow)
    seed(fast)
    apply_mix(slow)
    assert sent(client) == 0
    client.admin.command("setParameter", 1, fastUpdates=True)
    apply_mix(fast)
    assert sent(client) == 100
    assert list(fast.find().sort("_id", 1)) == list(slow.find().sort("_id", 1))
    assert fast.count_documents({}) == 20
    assert client.t.command("validate", "fast")["valid"] is True


def test_counts_follow_tokumx(fast_server):
    c = fast_server.client()
    coll = c.t.c
    coll.insert_one({"_id": 1, "n": 1})
    r = coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
    assert (r.matched_count, r.modified_count) == (1, 1)
    # A missing document: reported as matched, but never created.
    r = coll.update_one({"_id": 2}, {"$inc": {"n": 1}})
    assert (r.matched_count, r.modified_count, r.upserted_id) == (1, 1, None)
    assert coll.count_documents({}) == 1
    assert coll.find_one({"_id": 2}) is None
    # An update that cannot apply leaves the document as it was, without an error.
    coll.update_one({"_id": 1}, {"$set": {"s": "text"}})
    r = coll.update_one({"_id": 1}, {"$inc": {"s": 1}})
    assert r.matched_count == 1
    assert coll.find_one({"_id": 1}) == {"_id": 1, "n": 2, "s": "text"}
    status = c.admin.command("serverStatus")["shale"]["fastUpdates"]
    assert status["enabled"] is True and status["errors"] >= 1
    c.close()


def test_ineligible_updates_take_the_normal_path(fast_server):
    c = fast_server.client()
    coll = c.t.c
    coll.create_index("k")
    coll.insert_many([{"_id": i, "k": i, "a": [1, 2], "n": 0} for i in range(3)])
    before = sent(c)
    # An indexed field: exact counts, and the index follows.
    r = coll.update_one({"_id": 9}, {"$set": {"k": 5}})
    assert (r.matched_count, r.modified_count) == (0, 0)
    coll.update_one({"_id": 0}, {"$set": {"k": 50}})
    assert [d["_id"] for d in coll.find({"k": 50})] == [0]
    # Upsert, multi, a filter beyond _id, positional, findAndModify: exact counts.
    r = coll.update_one({"_id": 7}, {"$inc": {"n": 1}}, upsert=True)
    assert r.upserted_id == 7
    r = coll.update_many({"_id": {"$lte": 1}}, {"$inc": {"n": 1}})
    assert r.matched_count == 2
    r = coll.update_one({"_id": 1, "n": 99}, {"$inc": {"n": 1}})
    assert r.matched_count == 0
    r = coll.update_one({"_id": 2, "a": 2}, {"$set": {"a.$": 20}})
    assert r.modified_count == 1
    got = coll.find_one_and_update(
        {"_id": 2}, {"$inc": {"n": 1}}, return_document=ReturnDocument.AFTER
    )
    assert got["n"] == 1
    # An update of _id is refused as usual.
    with pytest.raises(Exception):
        coll.update_one({"_id": 2}, {"$set": {"_id": 3}})
    # Inside a transaction.
    with c.start_session() as s:
        with s.start_transaction():
            r = coll.update_one({"_id": 42}, {"$inc": {"n": 1}}, session=s)
            assert r.matched_count == 0
    assert sent(c) == before
    # A clustering index carries the document: every update reads.
    other = c.t.clustered
    other.create_index("x", clustering=True)
    other.insert_one({"_id": 1, "x": 1, "n": 0})
    other.update_one({"_id": 1}, {"$inc": {"n": 1}})
    assert sent(c) == before
    assert other.find_one({"x": 1}, hint="x_1")["n"] == 1
    # An eligible one for contrast.
    coll.update_one({"_id": 0}, {"$inc": {"n": 1}})
    assert sent(c) == before + 1
    assert c.t.command("validate", "c")["valid"] is True
    c.close()


def test_a_kill_and_restart_keep_fast_updated_values(tmp_path):
    data = tmp_path / "data"
    srv = Server(data, args=["--setParameter", "fastUpdates=true"])
    c = srv.client()
    coll = c.t.c
    coll.insert_many([{"_id": i, "n": 0} for i in range(50)])
    for _ in range(4):
        for i in range(50):
            coll.update_one({"_id": i}, {"$inc": {"n": i}, "$set": {"seen": True}})
    assert sent(c) == 200
    expected = list(coll.find().sort("_id", 1))
    c.close()
    srv.stop(signal.SIGKILL)
    srv = Server(data)
    c = srv.client()
    got = list(c.t.c.find().sort("_id", 1))
    assert got == expected
    assert got[7] == {"_id": 7, "n": 28, "seen": True}
    assert c.t.c.count_documents({}) == 50
    assert c.t.command("validate", "c")["valid"] is True
    c.close()
    srv.stop()


def test_validate_corrects_the_size_fast_updates_leave_only_in_the_foreground(client):
    """A fast update changes a document's size unseen; a foreground validate corrects the
    counter (as mongod's corrects its counts), a background one only reports it, and
    `enforceFastCount` makes it an error."""
    coll = client.t.sizes
    coll.insert_many([{"_id": i, "s": "x"} for i in range(10)])
    client.admin.command("setParameter", 1, fastUpdates=True)
    try:
        for i in range(10):
            coll.update_one({"_id": i}, {"$set": {"s": "y" * 100}})
        assert sent(client) >= 10
    finally:
        client.admin.command("setParameter", 1, fastUpdates=False)
    background = client.t.command("validate", "sizes", background=True)
    assert background["valid"] and "not corrected" in " ".join(background["warnings"])
    assert not client.t.command("validate", "sizes", enforceFastCount=True)["valid"]
    plain = client.t.command("validate", "sizes")
    assert plain["valid"] and "corrected" in " ".join(plain["warnings"])
    after = client.t.command("validate", "sizes", enforceFastCount=True)
    assert after["valid"] and after["warnings"] == []
