"""Until sessions carry real transactions, a driver's transaction must never be applied
statement by statement (issue 24, item 1): every command with `txnNumber`, `autocommit` or
`startTransaction` is refused before it writes, with mongod's standalone answer
(IllegalOperation, 20), so nothing of a failed or aborted transaction is left behind."""

import pytest
from pymongo.errors import OperationFailure

ILLEGAL_OPERATION = 20


def test_with_transaction_that_fails_midway_writes_nothing(client):
    coll = client.txn.accounts
    coll.insert_one({"_id": "seed"})

    def transfer(session):
        coll.insert_one({"_id": 1, "balance": 100}, session=session)
        coll.update_one({"_id": "seed"}, {"$set": {"touched": True}}, session=session)
        raise RuntimeError("the application fails midway")

    with client.start_session() as session:
        with pytest.raises((OperationFailure, RuntimeError)) as info:
            session.with_transaction(transfer)
    if isinstance(info.value, OperationFailure):
        assert info.value.code == ILLEGAL_OPERATION
        assert "replica set" in str(info.value)
    assert list(coll.find()) == [{"_id": "seed"}]


def test_an_explicit_abort_leaves_nothing(client):
    coll = client.txn.orders
    with client.start_session() as session:
        session.start_transaction()
        with pytest.raises(OperationFailure) as info:
            coll.insert_one({"_id": 1}, session=session)
        assert info.value.code == ILLEGAL_OPERATION
        session.abort_transaction()
    assert coll.count_documents({}) == 0


def test_transaction_fields_are_refused_on_every_command(client):
    db = client.txn
    lsid = {"id": client.start_session().session_id["id"]}
    statements = [
        {"insert": "c", "documents": [{"_id": 1}]},
        {"update": "c", "updates": [{"q": {}, "u": {"$set": {"a": 1}}, "upsert": True}]},
        {"delete": "c", "deletes": [{"q": {}, "limit": 0}]},
        {"find": "c"},
        {"findAndModify": "c", "query": {}, "update": {"$set": {"a": 1}}, "upsert": True},
    ]
    for stmt in statements:
        with pytest.raises(OperationFailure) as info:
            db.command({**stmt, "lsid": lsid, "txnNumber": 1, "autocommit": False,
                        "startTransaction": True})
        assert info.value.code == ILLEGAL_OPERATION, stmt
    for name in ["commitTransaction", "abortTransaction"]:
        with pytest.raises(OperationFailure) as info:
            client.admin.command({name: 1, "lsid": lsid, "txnNumber": 1, "autocommit": False})
        assert info.value.code == ILLEGAL_OPERATION
    # A retryable-write style txnNumber alone is refused the same way.
    with pytest.raises(OperationFailure) as info:
        db.command({"insert": "c", "documents": [{"_id": 2}], "lsid": lsid, "txnNumber": 7})
    assert info.value.code == ILLEGAL_OPERATION
    # autocommit without txnNumber: InvalidOptions, as mongod.
    with pytest.raises(OperationFailure) as info:
        db.command({"find": "c", "lsid": lsid, "autocommit": False})
    assert info.value.code == 72
    assert db.c.count_documents({}) == 0
    # Plain session use (lsid only) goes on working.
    with client.start_session() as session:
        db.c.insert_one({"_id": 3}, session=session)
        assert db.c.find_one({"_id": 3}, session=session) == {"_id": 3}
