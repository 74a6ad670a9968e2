"""What an acknowledged commit may rely on across a kill -9 (the cause hunt behind one
"acknowledged transactions lost" in test_txn_crash_loop.py):
- a `commitTransaction` retried by hand, with the same `lsid` and `txnNumber`, against the
  restarted server is `NoSuchTransaction` (251), as mongod answers a commit of a transaction
  it has no record of (SERVER-37179), never `ok: 1`: that a driver's retry reaching a
  restarted standalone cannot turn a lost commit into an acknowledged one. The committed
  transaction's documents are there, the uncommitted one's are not;
- writers whose first transactions all create the same collection implicitly lose no
  acknowledged commit across a restart. Before the fix, a transaction that created the
  name in the window between another's engine commit and its publication in the catalog
  (the other's log fsync) put a second record over the first and orphaned its documents
  (`shale-db` `txn_ddl.rs`; the deterministic test is its unit test
  `a_collection_committed_but_not_yet_published_is_not_created_twice`; this one caught the
  race about once per hundred collections on a loaded 2-core machine)."""

import signal
import threading
import uuid

from bson import Binary, Int64
from pymongo.errors import PyMongoError

from conftest import Server
from wire_client import RawConnection

NO_SUCH_TRANSACTION = 251


def txn_cmd(doc: dict, lsid: dict, db: str, start: bool = False) -> dict:
    out = {**doc, "lsid": lsid, "txnNumber": Int64(1), "autocommit": False, "$db": db}
    if start:
        out["startTransaction"] = True
    return out


def commit(lsid: dict) -> dict:
    return txn_cmd({"commitTransaction": 1}, lsid, "admin")


def test_a_commit_retried_on_the_restarted_server_is_no_such_transaction(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    srv = Server(data)
    port = srv.port
    committed, open_txn = ({"id": Binary.from_uuid(uuid.uuid4())} for _ in range(2))
    try:
        with RawConnection(port) as conn:
            assert conn.command({"create": "kept", "$db": "app"}).doc["ok"] == 1.0
            for lsid, name in ((committed, "committed"), (open_txn, "open")):
                insert = {"insert": "kept", "documents": [{"_id": name}]}
                r = conn.command(txn_cmd(insert, lsid, "app", start=True))
                assert r.doc["ok"] == 1.0, r.doc
            assert conn.command(commit(committed)).doc["ok"] == 1.0
            # The server that knows it answers a retried commit ok again.
            assert conn.command(commit(committed)).doc["ok"] == 1.0
            srv.stop(signal.SIGKILL)
        srv = Server(data, port=port)
        with RawConnection(port) as conn:
            for lsid in (committed, open_txn):
                r = conn.command(commit(lsid))
                assert (r.doc["ok"], r.doc.get("code")) == (0.0, NO_SUCH_TRANSACTION), r.doc
                assert r.doc["errorLabels"] == ["TransientTransactionError"], r.doc
        with srv.client() as c:
            assert [d["_id"] for d in c.app.kept.find()] == ["committed"]
    finally:
        srv.stop()


COLLECTIONS = 40
WRITERS = 4


def first_transactions(client, name, w, barrier, acked, lock):
    """Writer `w`'s transactions on the new collection `name`, all started at once."""
    coll = client.race[name]
    barrier.wait()
    for attempt in range(3):
        txn = f"{w}-{attempt}"
        try:
            with client.start_session() as s:
                s.start_transaction()
                coll.insert_many([{"_id": f"{txn}-{j}"} for j in range(3)], session=s)
                s.commit_transaction()
            with lock:
                acked.append((name, txn))
        except PyMongoError:
            pass


def test_first_transactions_creating_one_collection_lose_no_commit(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    srv = Server(data)
    port = srv.port
    acked, lock = [], threading.Lock()
    try:
        clients = [srv.client() for _ in range(WRITERS)]
        for k in range(COLLECTIONS):
            barrier = threading.Barrier(WRITERS)
            threads = [
                threading.Thread(
                    target=first_transactions,
                    args=(clients[w], f"c{k}", w, barrier, acked, lock),
                )
                for w in range(WRITERS)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        for c in clients:
            c.close()
        log = srv.read_log()
        srv.stop(signal.SIGKILL)
        srv = Server(data, port=port)
        with srv.client() as c:
            present = {}
            for k in range(COLLECTIONS):
                present[f"c{k}"] = {d["_id"] for d in c.race[f"c{k}"].find()}
            lost = [(n, t) for n, t in acked if f"{t}-0" not in present[n]]
            assert not lost, f"acknowledged transactions lost: {lost[:10]}"
            assert len(acked) >= COLLECTIONS
        # What the race left in the log before the fix: the second record's publication.
        assert "already in the catalog" not in log
    finally:
        srv.stop()
