"""Retryable writes (`lsid` + `txnNumber` without `autocommit`), sent by hand as drivers send
them to a replica set (pymongo sends them only to replica sets and mongos, and this server
reports itself as a standalone): each statement runs once, a retry answers from the record,
across restarts and crashes too."""

import signal
import uuid

import pytest
from bson import Binary, Int64

from conftest import Server
from wire_client import RawConnection


def lsid() -> dict:
    return {"id": Binary.from_uuid(uuid.uuid4())}


def retryable(doc: dict, session: dict, n: int, db: str = "rw") -> dict:
    return {**doc, "lsid": session, "txnNumber": Int64(n), "$db": db}


def test_a_retried_insert_answers_the_original_result_and_writes_once(client, server):
    s = lsid()
    cmd = retryable({"insert": "c", "documents": [{"_id": 1}, {"_id": 2}]}, s, 1)
    with RawConnection(server.port) as conn:
        first = conn.command(cmd).doc
        assert (first["ok"], first["n"]) == (1.0, 2)
        assert "retriedStmtIds" not in first
        again = conn.command(cmd).doc
        assert (again["ok"], again["n"], again.get("writeErrors")) == (1.0, 2, None)
        assert again["retriedStmtIds"] == [0, 1]
    assert client.rw.c.count_documents({}) == 2


def test_a_retry_after_a_crash_answers_from_the_record(tmp_path):
    srv = Server(tmp_path / "data")
    s = lsid()
    cmd = retryable({"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"x": 1}},
                                                  "upsert": True}]}, s, 4)
    fam = retryable({"findAndModify": "c", "query": {"_id": 1}, "update": {"$inc": {"x": 10}},
                     "new": True}, s, 5)
    with RawConnection(srv.port) as conn:
        first = conn.command(cmd).doc
        assert (first["n"], first["upserted"][0]["_id"]) == (1, 1)
        found = conn.command(fam).doc
        assert found["value"] == {"_id": 1, "x": 11}
    srv.stop(signal.SIGKILL)
    srv = Server(tmp_path / "data")
    try:
        with RawConnection(srv.port) as conn:
            again = conn.command(fam).doc
            assert again["value"] == {"_id": 1, "x": 11}
            assert again["retriedStmtIds"] == [0]
            # The update's number is older than the session's newest write now.
            old = conn.command(cmd).doc
            assert (old["ok"], old["code"], old["codeName"]) == (0.0, 225, "TransactionTooOld")
        c = srv.client()
        assert c.rw.c.find_one({"_id": 1}) == {"_id": 1, "x": 11}
        c.close()
    finally:
        srv.stop()


def test_find_and_modify_retry_returns_the_original_document(client, server):
    client.rw.f.insert_one({"_id": 1, "state": "new"})
    s = lsid()
    cmd = retryable({"findAndModify": "f", "query": {"state": "new"},
                     "update": {"$set": {"state": "taken"}}}, s, 1)
    with RawConnection(server.port) as conn:
        first = conn.command(cmd).doc
        assert first["value"] == {"_id": 1, "state": "new"}
        client.rw.f.update_one({"_id": 1}, {"$set": {"state": "done"}})
        again = conn.command(cmd).doc
        assert again["value"] == {"_id": 1, "state": "new"}
        assert again["lastErrorObject"] == first["lastErrorObject"]
    assert client.rw.f.find_one() == {"_id": 1, "state": "done"}


def test_an_older_txn_number_is_transaction_too_old(server):
    s = lsid()
    with RawConnection(server.port) as conn:
        assert conn.command(retryable({"insert": "c", "documents": [{}]}, s, 3)).doc["ok"] == 1.0
        r = conn.command(retryable({"insert": "c", "documents": [{}]}, s, 2)).doc
        assert (r["ok"], r["code"]) == (0.0, 225)


def test_multi_statements_are_not_retryable_and_failed_ones_run_again(client, server):
    client.rw.m.insert_many([{"_id": 1}, {"_id": 2}])
    s = lsid()
    with RawConnection(server.port) as conn:
        up = retryable({"update": "m", "ordered": False, "updates": [
            {"q": {"_id": 1}, "u": {"$set": {"a": 1}}},
            {"q": {}, "u": {"$set": {"b": 1}}, "multi": True}]}, s, 1)
        r = conn.command(up).doc
        assert r["n"] == 1 and r["writeErrors"][0]["index"] == 1
        assert r["writeErrors"][0]["code"] == 72
        rm = retryable({"delete": "m", "deletes": [{"q": {}, "limit": 0}]}, s, 2)
        assert conn.command(rm).doc["writeErrors"][0]["code"] == 72
        dup = retryable({"insert": "m", "documents": [{"_id": 3}, {"_id": 1}]}, s, 3)
        r = conn.command(dup).doc
        assert r["n"] == 1 and r["writeErrors"][0]["code"] == 11000
        # The failed statement was not recorded: the retry runs it (and fails) again.
        client.rw.m.delete_one({"_id": 1})
        r = conn.command(dup).doc
        assert (r["n"], r.get("writeErrors"), r["retriedStmtIds"]) == (2, None, [0])
    assert client.rw.m.count_documents({}) == 3


def test_an_injected_retriable_error_is_labelled_and_the_retry_writes_once(tmp_path):
    srv = Server(tmp_path / "data", args=["--setParameter", "enableTestCommands=1"])
    try:
        c = srv.client()
        c.admin.command("configureFailPoint", "failCommand", mode={"times": 1},
                        data={"failCommands": ["insert"], "errorCode": 91})
        s = lsid()
        cmd = retryable({"insert": "c", "documents": [{"_id": 1}]}, s, 1)
        with RawConnection(srv.port) as conn:
            r = conn.command(cmd).doc
            assert (r["code"], r["errorLabels"]) == (91, ["RetryableWriteError"])
            assert conn.command(cmd).doc["n"] == 1
            assert conn.command(cmd).doc["retriedStmtIds"] == [0]
        assert c.rw.c.count_documents({}) == 1
        c.close()
    finally:
        srv.stop()


@pytest.mark.parametrize("n", [1])
def test_a_transaction_number_cannot_be_reused_as_a_retryable_write(client, server, n):
    s = lsid()
    with RawConnection(server.port) as conn:
        start = {"insert": "c", "documents": [{}], "lsid": s, "txnNumber": Int64(n),
                 "autocommit": False, "startTransaction": True, "$db": "rw"}
        assert conn.command(start).doc["ok"] == 1.0
        r = conn.command(retryable({"insert": "c", "documents": [{}]}, s, n)).doc
        assert (r["ok"], r["code"]) == (0.0, 217)
