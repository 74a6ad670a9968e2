"""DDL inside a session transaction (issue 24 item 9), as mongod 4.4+ allows it: `create`,
implicit creation by a write, and `createIndexes` on a collection the same transaction
created. The collection is seen only by its transaction until the commit, kept with its
indexes across a restart, gone after an abort; `createIndexes` on an existing or non-empty
collection is refused with 263 and aborts the transaction. On a `--replSet` member the
transaction's `applyOps` carries the `create` before the inserts."""

import signal

import pytest
from pymongo.errors import OperationFailure

from conftest import Server

NOT_IN_TRANSACTION = 263
NAMESPACE_EXISTS = 48
NO_SUCH_TRANSACTION = 251


def names(client, db):
    return sorted(client[db].list_collection_names())


def test_an_implicit_create_is_seen_only_after_the_commit(client):
    coll = client.app.fresh
    with client.start_session() as s:
        s.start_transaction()
        coll.insert_one({"_id": 1}, session=s)
        coll.insert_one({"_id": 2}, session=s)
        assert "fresh" not in names(client, "app")
        assert coll.find_one({"_id": 2}, session=s) == {"_id": 2}
        assert coll.count_documents({}, session=s) == 2
        assert coll.find_one({"_id": 1}) is None
        s.commit_transaction()
    assert "fresh" in names(client, "app")
    assert sorted(d["_id"] for d in coll.find()) == [1, 2]


def test_an_abort_leaves_no_collection(client):
    coll = client.app.gone
    with client.start_session() as s:
        s.start_transaction()
        client.app.create_collection("gone", session=s)
        coll.insert_one({"_id": 1}, session=s)
        s.abort_transaction()
    assert "gone" not in names(client, "app")
    # The name is free again, outside a transaction and in one.
    coll.insert_one({"_id": 5})
    assert list(coll.find()) == [{"_id": 5}]


def test_create_and_indexes_in_a_transaction_survive_a_restart(tmp_path):
    srv = Server(tmp_path / "data")
    with srv.client() as c:
        coll = c.app.people
        with c.start_session() as s:
            s.start_transaction()
            c.app.create_collection("people", session=s)
            assert coll.create_index("email", unique=True, session=s) == "email_1"
            coll.insert_one({"_id": 1, "email": "a@x", "tags": ["t1", "t2"]}, session=s)
            with pytest.raises(OperationFailure) as e:
                coll.insert_one({"_id": 2, "email": "a@x"}, session=s)
            assert e.value.code == 11000
        # The failed statement aborted the transaction: nothing was created.
        assert "people" not in names(c, "app")
        with c.start_session() as s:
            s.start_transaction()
            c.app.create_collection("people", session=s)
            coll.create_index("email", unique=True, session=s)
            coll.create_index("tags", session=s)
            coll.insert_one({"_id": 1, "email": "a@x", "tags": ["t1", "t2"]}, session=s)
            s.commit_transaction()
        plan = coll.find({"email": "a@x"}).explain()["queryPlanner"]["winningPlan"]
        assert "IXSCAN" in str(plan)
    srv.stop(signal.SIGKILL)
    srv = Server(tmp_path / "data")
    with srv.client() as c:
        coll = c.app.people
        assert sorted(i["name"] for i in coll.list_indexes()) == ["_id_", "email_1", "tags_1"]
        assert coll.find_one({"tags": "t2"})["_id"] == 1
        with pytest.raises(OperationFailure) as e:
            coll.insert_one({"_id": 3, "email": "a@x"})
        assert e.value.code == 11000
    srv.stop()


def test_create_indexes_on_an_existing_or_non_empty_collection_is_refused(client):
    client.app.old.insert_one({"_id": 1})
    with client.start_session() as s:
        s.start_transaction()
        with pytest.raises(OperationFailure) as e:
            client.app.old.create_index("x", session=s)
        assert e.value.code == NOT_IN_TRANSACTION
        assert "TransientTransactionError" not in (e.value.details or {}).get("errorLabels", [])
        with pytest.raises(OperationFailure) as e:
            s.commit_transaction()
        assert e.value.code == NO_SUCH_TRANSACTION
    with client.start_session() as s:
        s.start_transaction()
        client.app.new.insert_one({"_id": 1}, session=s)
        with pytest.raises(OperationFailure) as e:
            client.app.new.create_index("x", session=s)
        assert e.value.code == NOT_IN_TRANSACTION
    assert "new" not in names(client, "app")
    assert [i["name"] for i in client.app.old.list_indexes()] == ["_id_"]


def test_create_of_an_existing_name_is_namespace_exists(client):
    client.app.taken.insert_one({"_id": 1})
    with client.start_session() as s:
        s.start_transaction()
        with pytest.raises(OperationFailure) as e:
            client.app.create_collection("taken", session=s)
        assert e.value.code == NAMESPACE_EXISTS
    with client.start_session() as s:
        s.start_transaction()
        with pytest.raises(OperationFailure) as e:
            client.app.command(
                "create", "v", viewOn="taken", pipeline=[], session=s
            )
        assert e.value.code == NOT_IN_TRANSACTION


def test_a_concurrent_create_of_the_same_name_conflicts(client):
    with client.start_session() as s:
        s.start_transaction()
        client.app.race.insert_one({"_id": "txn"}, session=s)
        with pytest.raises(OperationFailure) as e:
            client.app.create_collection("race")
        assert e.value.code == 112  # WriteConflict: the transaction holds the name
        s.commit_transaction()
    assert list(client.app.race.find()) == [{"_id": "txn"}]


def test_the_oplog_has_the_create_in_the_transactions_apply_ops(tmp_path):
    srv = Server(tmp_path / "data", args=["--replSet", "rs0"])
    with srv.client() as c:
        c.admin.command("replSetInitiate")
    with srv.client() as c:
        with c.start_session() as s:
            s.start_transaction()
            c.app.logged.insert_one({"_id": 1}, session=s)
            s.commit_transaction()
        entry = c.local["oplog.rs"].find({"o.applyOps": {"$exists": True}}).sort("$natural", -1).next()
        ops = entry["o"]["applyOps"]
        assert [(o["op"], o["ns"]) for o in ops] == [("c", "app.$cmd"), ("i", "app.logged")]
        assert ops[0]["o"] == {"create": "logged", "idIndex": {"v": 2, "key": {"_id": 1}, "name": "_id_"}}
        assert ops[0]["ui"] == ops[1]["ui"]
    srv.stop()
