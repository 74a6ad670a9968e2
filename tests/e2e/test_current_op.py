"""`currentOp`, `$currentOp` and `killOp` (mongosh's `db.currentOp()` / `db.killOp()`): the
registry of operations in flight, and a long find, getMore, aggregate and update killed with
mongod's `Interrupted` (11601)."""

import threading
import time

import pytest
from pymongo.errors import OperationFailure

# Each document costs a 3,000-term `$add` to match: a scan of the collection takes seconds.
SLOW = {"$expr": {"$lt": [{"$add": ["$x"] + list(range(3000))}, -1]}}


def fill(coll, n=20000):
    coll.drop()
    coll.insert_many([{"_id": i, "x": i} for i in range(n)])


def wait_for_op(client, ns, timeout=20):
    """The in-flight operation on `ns`, once it shows."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # `$currentOp` itself shows whole commands; the `currentOp` command truncates them.
        pipeline = [{"$currentOp": {}}, {"$match": {"ns": ns}}]
        ops = list(client.admin.aggregate(pipeline))
        if ops:
            return ops[0]
        time.sleep(0.05)
    raise AssertionError(f"no operation on {ns} appeared")


def run_in_thread(fn):
    box = {}

    def target():
        try:
            box["result"] = fn()
        except Exception as e:  # noqa: BLE001 - the test inspects it
            box["error"] = e

    t = threading.Thread(target=target)
    t.start()
    return t, box


def kill_and_check(client, ns, fn):
    t, box = run_in_thread(fn)
    op = wait_for_op(client, ns)
    assert op["active"] is True
    assert isinstance(op["opid"], int)
    reply = client.admin.command("killOp", op=op["opid"])
    assert reply["info"] == "attempting to kill op"
    t.join(30)
    assert not t.is_alive(), "the killed operation ended"
    err = box.get("error")
    assert isinstance(err, OperationFailure), box
    assert err.code == 11601 and err.details["codeName"] == "Interrupted"
    return op


def test_a_long_find_is_listed_and_killed(client):
    coll = client.opsdb.big
    fill(coll)
    started = time.monotonic()
    op = kill_and_check(client, "opsdb.big", lambda: list(coll.find(SLOW)))
    assert time.monotonic() - started < 15
    assert op["op"] == "query"
    assert op["ns"] == "opsdb.big"
    assert op["command"]["find"] == "big"
    assert op["command"]["filter"] == SLOW
    assert isinstance(op["secs_running"], int) and isinstance(op["microsecs_running"], int)
    assert op["type"] == "op" and op["desc"].startswith("conn")
    assert isinstance(op["connectionId"], int)
    assert op["client"].startswith("127.0.0.1:")
    assert "lsid" in op
    # The connection serves the next command as usual.
    assert coll.count_documents({"_id": {"$lt": 10}}) == 10


def test_a_long_aggregate_and_update_are_killed(client):
    coll = client.opsdb.big2
    fill(coll)
    op = kill_and_check(client, "opsdb.big2", lambda: list(coll.aggregate([{"$match": SLOW}])))
    assert op["op"] == "command" and op["command"]["aggregate"] == "big2"
    op = kill_and_check(
        client, "opsdb.big2", lambda: coll.update_many(SLOW, {"$set": {"y": 1}})
    )
    assert op["op"] == "update"
    assert coll.count_documents({"y": 1}) == 0


def test_a_long_get_more_is_killed_and_its_cursor_closed(client):
    coll = client.opsdb.big3
    fill(coll)
    # The first batch stops after `_id` 1 (the next match, read to know the cursor goes
    # on); the getMore after it scans the rest.
    cursor = coll.find({"$or": [{"_id": {"$in": [0, 1]}}, SLOW]}, batch_size=1)
    assert next(cursor) == {"_id": 0, "x": 0}
    op = kill_and_check(client, "opsdb.big3", lambda: list(cursor))
    assert op["op"] == "getmore" and op["command"]["collection"] == "big3"
    with pytest.raises(OperationFailure) as e:
        client.opsdb.command("getMore", op["command"]["getMore"], collection="big3")
    assert e.value.code == 43, "the interrupted cursor is gone, as on mongod"


def test_current_op_shows_idle_connections_only_with_all(server, client):
    other = server.client(appname="idler")
    other.admin.command("ping")  # its pooled connection now waits, idle
    own = client.admin.command({"currentOp": 1, "op": "command", "command.currentOp": 1})
    assert [o["command"]["currentOp"] for o in own["inprog"]] == [1]
    every = client.admin.command({"currentOp": 1, "$all": True})["inprog"]
    idle = [o for o in every if not o["active"]]
    assert any(o.get("appName") == "idler" for o in idle)
    assert all("opid" not in o for o in idle)
    active = client.admin.command("currentOp")["inprog"]
    assert all(o["active"] for o in active)
    other.close()


def test_current_op_truncates_long_commands(client):
    coll = client.opsdb.trunc
    fill(coll, 5000)
    t, box = run_in_thread(lambda: list(coll.find(SLOW)))
    wait_for_op(client, "opsdb.trunc")
    op = client.admin.command({"currentOp": 1, "ns": "opsdb.trunc"})["inprog"][0]
    assert set(op["command"]) == {"$truncated"}
    client.admin.command("killOp", op=op["opid"])
    t.join(30)


def test_current_op_stage_options_as_mongod(client):
    ops = list(client.admin.aggregate([{"$currentOp": {"allUsers": True, "localOps": True}}]))
    assert ops and ops[0]["ns"] == "admin.$cmd.aggregate"
    projected = list(
        client.admin.aggregate(
            [{"$currentOp": {}}, {"$project": {"_id": 0, "op": 1}}]
        )
    )
    assert projected == [{"op": "command"}]
    for spec, code in [
        ({"allUsers": 1}, 9),
        ({"nope": True}, 9),
        ({"idleCursors": True}, 238),
    ]:
        with pytest.raises(OperationFailure) as e:
            list(client.admin.aggregate([{"$currentOp": spec}]))
        assert e.value.code == code, spec
    with pytest.raises(OperationFailure) as e:
        list(client.opsdb.aggregate([{"$currentOp": {}}]))
    assert e.value.code == 73
    with pytest.raises(OperationFailure) as e:
        list(client.admin.aggregate([{"$match": {}}, {"$currentOp": {}}]))
    assert e.value.code == 40602


def test_idle_sessions_with_open_transactions_are_listed(client):
    client.opsdb.tx.insert_one({"_id": 0})
    with client.start_session() as s:
        s.start_transaction()
        client.opsdb.tx.insert_one({"_id": 1}, session=s)
        ops = list(client.admin.aggregate([{"$currentOp": {"allUsers": True}}]))
        idle = [o for o in ops if o["type"] == "idleSession"]
        assert len(idle) == 1
        assert idle[0]["lsid"]["id"] == s.session_id["id"]
        assert idle[0]["transaction"]["parameters"]["autocommit"] is False
        none = list(client.admin.aggregate([{"$currentOp": {"idleSessions": False}}]))
        assert not [o for o in none if o["type"] == "idleSession"]
        s.abort_transaction()


def test_kill_op_checks_its_arguments_as_mongod(client):
    assert client.admin.command("killOp", op=2_000_000_000)["info"] == "attempting to kill op"
    for args, code in [({}, 4), ({"op": "x"}, 14), ({"op": 1 << 40}, 26823)]:
        with pytest.raises(OperationFailure) as e:
            client.admin.command("killOp", **args)
        assert e.value.code == code, args
    with pytest.raises(OperationFailure) as e:
        client.opsdb.command("killOp", op=1)
    assert e.value.code == 13
    with pytest.raises(OperationFailure) as e:
        client.opsdb.command("currentOp")
    assert e.value.code == 13
