"""TokuMX's connection-scoped transactions (issue 24): `beginTransaction` starts one on the
connection, its commands without an `lsid` run in it until `commitTransaction` or
`rollbackTransaction`, other connections do not see its writes before the commit, and
closing the connection aborts it. Only `mvcc` isolation is served."""

import time

from wire_client import RawConnection

BAD_VALUE = 2
NO_SUCH_TRANSACTION = 251
NOT_IN_TRANSACTION = 263


def cmd(doc: dict, db: str = "tokumx") -> dict:
    return {**doc, "$db": db}


def ids(conn: RawConnection, coll: str) -> list:
    r = conn.command(cmd({"find": coll, "sort": {"_id": 1}}))
    assert r.doc["ok"] == 1.0, r.doc
    return [d["_id"] for d in r.doc["cursor"]["firstBatch"]]


def test_statements_commit_or_roll_back_together(server):
    with RawConnection(server.port) as conn, RawConnection(server.port) as other:
        assert conn.command(cmd({"beginTransaction": 1})).doc["ok"] == 1.0
        assert conn.command(cmd({"insert": "c", "documents": [{"_id": 1}, {"_id": 2}]})).doc["n"] == 2
        assert conn.command(cmd({"delete": "c", "deletes": [{"q": {"_id": 1}, "limit": 1}]})).doc["n"] == 1
        assert ids(conn, "c") == [2]
        assert ids(other, "c") == []
        # Diagnostics run outside it; count is refused inside, as in a session transaction.
        assert conn.command(cmd({"ping": 1}, db="admin")).doc["ok"] == 1.0
        assert conn.command(cmd({"count": "c"})).doc["code"] == NOT_IN_TRANSACTION
        assert conn.command(cmd({"commitTransaction": 1})).doc["ok"] == 1.0
        assert ids(other, "c") == [2]

        assert conn.command(cmd({"beginTransaction": 1, "isolation": "mvcc"})).doc["ok"] == 1.0
        conn.command(cmd({"insert": "c", "documents": [{"_id": 3}]}))
        assert conn.command(cmd({"rollbackTransaction": 1})).doc["ok"] == 1.0
        assert ids(conn, "c") == [2]
        r = conn.command(cmd({"rollbackTransaction": 1}))
        assert r.doc["ok"] == 0.0


def test_only_mvcc_isolation_and_one_transaction_at_a_time(server):
    with RawConnection(server.port) as conn:
        for level in ["serializable", "readUncommitted"]:
            r = conn.command(cmd({"beginTransaction": 1, "isolation": level}))
            assert r.doc["code"] == BAD_VALUE and level in r.doc["errmsg"], r.doc
        assert conn.command(cmd({"beginTransaction": 1})).doc["ok"] == 1.0
        assert conn.command(cmd({"beginTransaction": 1})).doc["ok"] == 0.0
        # A failed statement aborts it; later ones are refused until the rollback.
        conn.command(cmd({"insert": "d", "documents": [{"_id": 1}]}))
        r = conn.command(cmd({"insert": "d", "documents": [{"_id": 1}]}))
        assert r.doc["writeErrors"][0]["code"] == 11000
        r = conn.command(cmd({"find": "d"}))
        assert r.doc["code"] == NO_SUCH_TRANSACTION, r.doc
        assert conn.command(cmd({"rollbackTransaction": 1})).doc["ok"] == 1.0
        assert ids(conn, "d") == []


def test_closing_the_connection_aborts_its_transaction(server):
    with RawConnection(server.port) as conn:
        assert conn.command(cmd({"beginTransaction": 1})).doc["ok"] == 1.0
        conn.command(cmd({"insert": "e", "documents": [{"_id": 1}]}))
    with RawConnection(server.port) as other:
        # The aborted transaction's key lock is gone: this insert does not conflict. The
        # server learns of the close when the connection's thread next reads the socket,
        # a moment after the client closed it, so the insert may race the abort: retry
        # the conflict for a few seconds.
        deadline = time.monotonic() + 10
        while True:
            r = other.command(cmd({"insert": "e", "documents": [{"_id": 1}]}))
            if "n" in r.doc or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert r.doc.get("n") == 1, r.doc
        assert ids(other, "e") == [1]
