"""Multi-document transactions over sessions (issue 24 item 3), driven by pymongo and, where
a driver hides the protocol, by raw commands: statements of one transaction commit or abort
together, a transaction reads its snapshot and its own writes, a write conflict is a
transient error that `with_transaction` retries, the session state machine answers with
mongod's codes, the lifetime limit reaps an idle transaction, and retryable writes are
still refused. ShaleDB runs transactions on a standalone, as TokuMX did; mongod would not."""

import threading
import time
import uuid

import pytest
from bson import Binary, Int64
from pymongo.errors import OperationFailure

from conftest import Server
from wire_client import RawConnection

WRITE_CONFLICT = 112
NO_SUCH_TRANSACTION = 251
TRANSACTION_COMMITTED = 256
TRANSACTION_TOO_OLD = 225
NOT_IN_TRANSACTION = 263
INVALID_OPTIONS = 72
TRANSIENT = "TransientTransactionError"


def test_with_transaction_commits_every_statement_atomically(client, server):
    accounts, log = client.bank.accounts, client.bank.log
    accounts.insert_many([{"_id": "a", "balance": 100}, {"_id": "b", "balance": 0}])
    observer = server.client()
    seen_inside = []

    def transfer(session):
        accounts.update_one({"_id": "a"}, {"$inc": {"balance": -30}}, session=session)
        accounts.update_one({"_id": "b"}, {"$inc": {"balance": 30}}, session=session)
        log.insert_one({"_id": 1, "amount": 30}, session=session)
        # Another client sees none of it before the commit.
        seen_inside.append(
            (list(observer.bank.accounts.find({}, sort=[("_id", 1)])), observer.bank.log.count_documents({}))
        )

    with client.start_session() as session:
        session.with_transaction(transfer)
    assert seen_inside == [([{"_id": "a", "balance": 100}, {"_id": "b", "balance": 0}], 0)]
    assert list(accounts.find({}, sort=[("_id", 1)])) == [
        {"_id": "a", "balance": 70},
        {"_id": "b", "balance": 30},
    ]
    assert list(log.find()) == [{"_id": 1, "amount": 30}]
    observer.close()


def test_a_callback_that_raises_midway_leaves_nothing(client):
    coll = client.txn.accounts
    coll.insert_one({"_id": "seed"})

    def transfer(session):
        coll.insert_one({"_id": 1, "balance": 100}, session=session)
        coll.update_one({"_id": "seed"}, {"$set": {"touched": True}}, session=session)
        raise RuntimeError("the application fails midway")

    with client.start_session() as session:
        with pytest.raises(RuntimeError):
            session.with_transaction(transfer)
    assert list(coll.find()) == [{"_id": "seed"}]


def test_an_explicit_abort_leaves_nothing(client):
    coll = client.txn.orders
    coll.insert_one({"_id": 0, "state": "new"})
    with client.start_session() as session:
        session.start_transaction()
        coll.insert_one({"_id": 1}, session=session)
        coll.update_one({"_id": 0}, {"$set": {"state": "paid"}}, session=session)
        coll.delete_one({"_id": 0}, session=session)
        assert coll.count_documents({}, session=session) == 1
        session.abort_transaction()
    assert list(coll.find()) == [{"_id": 0, "state": "new"}]


def test_a_write_conflict_is_transient_and_with_transaction_retries_it(client):
    coll = client.txn.counters
    coll.insert_one({"_id": 1, "n": 0})
    holder = client.start_session()
    holder.start_transaction()
    coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=holder)

    # A second transaction writing the same _id loses at once, with the label.
    with client.start_session() as loser:
        loser.start_transaction()
        with pytest.raises(OperationFailure) as info:
            coll.update_one({"_id": 1}, {"$inc": {"n": 10}}, session=loser)
        assert info.value.code == WRITE_CONFLICT
        assert info.value.has_error_label(TRANSIENT)
        # mongod aborts the transaction after a write conflict.
        with pytest.raises(OperationFailure) as info:
            coll.find_one({"_id": 1}, session=loser)
        assert info.value.code == NO_SUCH_TRANSACTION
        assert info.value.has_error_label(TRANSIENT)
        loser.abort_transaction()

    attempts = []

    def bump(session):
        attempts.append(1)
        try:
            coll.update_one({"_id": 1}, {"$inc": {"n": 100}}, session=session)
        except OperationFailure:
            if len(attempts) == 1:
                holder.commit_transaction()  # the retry then finds the key free
            raise

    with client.start_session() as session:
        session.with_transaction(bump)
    holder.end_session()
    assert len(attempts) == 2
    assert coll.find_one({"_id": 1}) == {"_id": 1, "n": 101}


def test_a_transaction_does_not_see_a_later_commit(client, server):
    coll = client.txn.snap
    coll.insert_many([{"_id": i} for i in range(3)])
    other = server.client()
    with client.start_session() as session:
        session.start_transaction()
        assert coll.count_documents({}, session=session) == 3
        other.txn.snap.insert_one({"_id": 99})
        other.txn.snap.delete_one({"_id": 0})
        assert [d["_id"] for d in coll.find({}, session=session).sort("_id", 1)] == [0, 1, 2]
        session.commit_transaction()
    assert [d["_id"] for d in coll.find().sort("_id", 1)] == [1, 2, 99]
    other.close()


def test_reads_inside_see_the_transactions_own_writes(client):
    coll = client.txn.own
    coll.insert_one({"_id": 0, "k": "old"})
    with client.start_session() as session:
        with session.start_transaction():
            coll.insert_many([{"_id": i, "k": f"k{i % 2}"} for i in range(1, 8)], session=session)
            coll.update_one({"_id": 0}, {"$set": {"k": "new"}}, session=session)
            # A cursor of several batches (getMore) reads the transaction's snapshot.
            ids = [d["_id"] for d in coll.find({}, batch_size=2, session=session).sort("_id", 1)]
            assert ids == list(range(8))
            assert coll.count_documents({"k": "k1"}, session=session) == 4
            assert sorted(coll.distinct("k", session=session)) == ["k0", "k1", "new"]
            grouped = coll.aggregate(
                [{"$group": {"_id": "$k", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}],
                session=session,
            )
            assert [(g["_id"], g["n"]) for g in grouped] == [("k0", 3), ("k1", 4), ("new", 1)]
            found = coll.find_one_and_update(
                {"_id": 7}, {"$set": {"k": "seven"}}, session=session, return_document=True
            )
            assert found == {"_id": 7, "k": "seven"}
            assert coll.find_one({"_id": 0}, session=session) == {"_id": 0, "k": "new"}
            assert client.txn.own.find_one({"_id": 0}) == {"_id": 0, "k": "old"}
    assert coll.count_documents({}) == 8


def lsid() -> dict:
    return {"id": Binary.from_uuid(uuid.uuid4())}


def txn_cmd(doc: dict, session: dict, n: int, start: bool = False, db: str = "txn") -> dict:
    out = {**doc, "lsid": session, "txnNumber": Int64(n), "autocommit": False, "$db": db}
    if start:
        out["startTransaction"] = True
    return out


def commit(n: int, session: dict) -> dict:
    return txn_cmd({"commitTransaction": 1}, session, n, db="admin")


def abort(n: int, session: dict) -> dict:
    return txn_cmd({"abortTransaction": 1}, session, n, db="admin")


def test_commit_twice_is_ok_and_abort_after_commit_is_transaction_committed(server):
    s = lsid()
    with RawConnection(server.port) as conn:
        r = conn.command(txn_cmd({"insert": "c", "documents": [{"_id": 1}]}, s, 1, start=True))
        assert r.doc["ok"] == 1.0, r.doc
        assert conn.command(commit(1, s)).doc["ok"] == 1.0
        assert conn.command(commit(1, s)).doc["ok"] == 1.0
        r = conn.command(abort(1, s))
        assert (r.doc["ok"], r.doc["code"]) == (0.0, TRANSACTION_COMMITTED), r.doc
        assert "errorLabels" not in r.doc
        r = conn.command(txn_cmd({"find": "c"}, s, 1))
        assert r.doc["code"] == TRANSACTION_COMMITTED


def test_the_session_state_machine_answers_with_mongods_codes(server):
    s = lsid()
    with RawConnection(server.port) as conn:
        # A statement of a transaction that never started.
        r = conn.command(txn_cmd({"find": "c"}, s, 1))
        assert r.doc["code"] == NO_SUCH_TRANSACTION and r.doc["errorLabels"] == [TRANSIENT]
        assert conn.command(txn_cmd({"insert": "c", "documents": [{"_id": 1}]}, s, 2, start=True)).doc["ok"] == 1.0
        # An older number.
        r = conn.command(txn_cmd({"find": "c"}, s, 1, start=True))
        assert r.doc["code"] == TRANSACTION_TOO_OLD, r.doc
        # readConcern on a later statement; writeConcern on a statement.
        r = conn.command({**txn_cmd({"find": "c"}, s, 2), "readConcern": {"level": "snapshot"}})
        assert r.doc["code"] == INVALID_OPTIONS
        assert "Only the first command" in r.doc["errmsg"]
        # The refused statements above aborted nothing; a command not allowed in a
        # transaction is refused, and that aborts nothing either.
        s2 = lsid()
        assert conn.command(txn_cmd({"insert": "d", "documents": [{"_id": 1}]}, s2, 1, start=True)).doc["ok"] == 1.0
        for doc in [{"collMod": "d"}, {"dropIndexes": "d", "index": "*"},
                    {"drop": "d"}, {"listCollections": 1}, {"count": "d"}]:
            r = conn.command(txn_cmd(doc, s2, 1))
            assert r.doc["code"] == NOT_IN_TRANSACTION, (doc, r.doc)
        r = conn.command(txn_cmd({"count": "d", "query": {}}, s2, 1))
        assert r.doc["errmsg"].startswith("Cannot run 'count' in a multi-document transaction.")
        r = conn.command(txn_cmd({"insert": "d", "documents": [{"_id": 2}], "writeConcern": {"w": 1}}, s2, 1))
        assert r.doc["code"] == INVALID_OPTIONS
        assert conn.command(commit(1, s2)).doc["ok"] == 1.0
        # Another session on another connection continues the first transaction.
        with RawConnection(server.port) as other:
            r = other.command(txn_cmd({"find": "c", "filter": {}}, s, 2))
            assert r.doc["cursor"]["firstBatch"] == [{"_id": 1}]
        assert conn.command(abort(2, s)).doc["ok"] == 1.0
        r = conn.command(commit(2, s))
        assert r.doc["code"] == NO_SUCH_TRANSACTION and r.doc["errorLabels"] == [TRANSIENT]
        # A bad readConcern level on the first statement starts nothing.
        r = conn.command({**txn_cmd({"find": "c"}, s, 3, start=True), "readConcern": {"level": "linearizable"}})
        assert r.doc["code"] == INVALID_OPTIONS
        r = conn.command({**txn_cmd({"find": "c"}, s, 3, start=True), "readConcern": {"level": "snapshot"}})
        assert r.doc["ok"] == 1.0
        # autocommit: true.
        r = conn.command({"find": "c", "lsid": s, "txnNumber": Int64(4), "autocommit": True, "$db": "txn"})
        assert r.doc["code"] == INVALID_OPTIONS
        # endSessions aborts the open transaction 3.
        conn.command({"insert": "c", "documents": [{"_id": 3}], "lsid": s, "txnNumber": Int64(3),
                      "autocommit": False, "$db": "txn"})
        assert conn.command({"endSessions": [s], "$db": "admin"}).doc["ok"] == 1.0
    # Only what committed is there: transaction 2 was aborted, 3 ended with its session.
    c = server.client()
    assert list(c.txn.c.find()) == []
    assert sorted(d["_id"] for d in c.txn.d.find()) == [1]
    c.close()


def test_a_txn_number_without_autocommit_on_a_read_is_refused(client, server):
    s = lsid()
    with RawConnection(server.port) as conn:
        r = conn.command({"find": "c", "lsid": s, "txnNumber": Int64(7), "$db": "txn"})
        assert (r.doc["ok"], r.doc["code"]) == (0.0, 50768)
        assert "not a retryable write command" in r.doc["errmsg"]
        r = conn.command({"find": "c", "lsid": s, "autocommit": False, "$db": "txn"})
        assert r.doc["code"] == INVALID_OPTIONS
    assert client.txn.c.count_documents({}) == 0
    # Plain session use (lsid only) goes on working.
    with client.start_session() as session:
        client.txn.c.insert_one({"_id": 3}, session=session)
        assert client.txn.c.find_one({"_id": 3}, session=session) == {"_id": 3}


def test_the_lifetime_limit_reaps_an_idle_transaction(tmp_path):
    srv = Server(tmp_path / "data", args=["--transactionLifetimeLimitSeconds", "1"])
    try:
        client = srv.client()
        assert client.admin.command({"getParameter": 1, "transactionLifetimeLimitSeconds": 1})[
            "transactionLifetimeLimitSeconds"
        ] == 1
        coll = client.txn.idle
        coll.insert_one({"_id": 1, "n": 0})
        session = client.start_session()
        session.start_transaction()
        coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=session)
        time.sleep(2.5)
        # The reaper released the key: a plain write goes through at once.
        coll.update_one({"_id": 1}, {"$inc": {"n": 10}})
        with pytest.raises(OperationFailure) as info:
            session.commit_transaction()
        assert info.value.code == NO_SUCH_TRANSACTION
        assert info.value.has_error_label(TRANSIENT)
        assert coll.find_one({"_id": 1}) == {"_id": 1, "n": 10}
        session.end_session()
        client.close()
    finally:
        srv.stop()


def test_ddl_aborts_a_live_transaction(client):
    coll = client.txn.ddl
    coll.insert_one({"_id": 0})
    with client.start_session() as session:
        session.start_transaction()
        coll.insert_one({"_id": 1}, session=session)
        coll.create_index("a")
        with pytest.raises(OperationFailure) as info:
            coll.insert_one({"_id": 2}, session=session)
        assert info.value.code == NO_SUCH_TRANSACTION
        assert info.value.has_error_label(TRANSIENT)
        session.abort_transaction()
    assert list(coll.find()) == [{"_id": 0}]


def test_a_duplicate_key_aborts_the_transaction(client):
    coll = client.txn.dup
    coll.insert_one({"_id": 1})
    with client.start_session() as session:
        session.start_transaction()
        coll.insert_one({"_id": 2}, session=session)
        with pytest.raises(OperationFailure) as info:
            coll.insert_one({"_id": 1}, session=session)
        assert info.value.code == 11000
        with pytest.raises(OperationFailure) as info:
            session.commit_transaction()
        assert info.value.code == NO_SUCH_TRANSACTION
    assert list(coll.find()) == [{"_id": 1}]


def test_concurrent_with_transaction_increments_lose_nothing(client):
    coll = client.txn.race
    coll.insert_one({"_id": 1, "n": 0})
    errors = []

    def worker():
        try:
            for _ in range(10):
                with client.start_session() as session:
                    session.with_transaction(
                        lambda s: coll.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s)
                    )
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert coll.find_one({"_id": 1}) == {"_id": 1, "n": 40}


def test_a_transaction_past_the_write_set_limit_fails_and_leaves_nothing(tmp_path):
    # A 0.25 GiB cache gives the engine's smallest write-set limit, 64 MiB.
    srv = Server(tmp_path / "data", args=["--cacheSizeGB", "0.25"])
    try:
        client = srv.client()
        coll = client.txn.big
        coll.insert_one({"_id": "seed"})
        pad = "x" * (12 << 20)
        with client.start_session() as session:
            session.start_transaction()
            with pytest.raises(OperationFailure) as info:
                for i in range(8):
                    coll.insert_one({"_id": i, "pad": pad}, session=session)
            assert info.value.code == 388, info.value.details
            assert not info.value.has_error_label(TRANSIENT)
            with pytest.raises(OperationFailure) as info:
                session.commit_transaction()
            assert info.value.code == NO_SUCH_TRANSACTION
        assert list(coll.find()) == [{"_id": "seed"}]
        client.close()
    finally:
        srv.stop()


def test_cursors_opened_in_a_transaction_close_when_it_ends(server):
    s = lsid()
    with RawConnection(server.port) as conn:
        docs = [{"_id": i} for i in range(5)]
        assert conn.command(txn_cmd({"insert": "cur", "documents": docs}, s, 1, start=True)).doc["ok"] == 1.0
        r = conn.command(txn_cmd({"find": "cur", "batchSize": 2}, s, 1))
        cursor = r.doc["cursor"]
        assert cursor["firstBatch"] == docs[:2] and cursor["id"] != 0
        r = conn.command(txn_cmd({"getMore": cursor["id"], "collection": "cur", "batchSize": 2}, s, 1))
        assert r.doc["cursor"]["nextBatch"] == docs[2:4]
        assert conn.command(commit(1, s)).doc["ok"] == 1.0
        r = conn.command({"getMore": cursor["id"], "collection": "cur", "$db": "txn"})
        assert r.doc["code"] == 43, r.doc


def test_closing_a_connection_does_not_end_its_transaction(server):
    s = lsid()
    with RawConnection(server.port) as first:
        r = first.command(txn_cmd({"insert": "conn", "documents": [{"_id": 1}]}, s, 1, start=True))
        assert r.doc["ok"] == 1.0
    with RawConnection(server.port) as second:
        r = second.command(txn_cmd({"insert": "conn", "documents": [{"_id": 2}]}, s, 1))
        assert r.doc["ok"] == 1.0, r.doc
        assert second.command(commit(1, s)).doc["ok"] == 1.0
    c = server.client()
    assert sorted(d["_id"] for d in c.txn.conn.find()) == [1, 2]
    c.close()
