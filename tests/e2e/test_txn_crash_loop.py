"""A kill -9 loop under concurrent multi-document transactions through the server (issue
24 item 10, without the oplog, which is not built yet). Writers run transactions that each
insert three documents tagged with the transaction's id and add one to their writer's
counter; the server is killed at a random moment, restarted, and checked:
- every transaction whose commit was acknowledged is there whole;
- every transaction is all or nothing (a commit the kill cut off before its reply may be
  there, whole, or not at all; never some of its documents);
- each writer's counter equals the number of its transactions that are there;
- validate passes on both collections.
Then the writers go on against the restarted server, and the next kill comes."""

import random
import time

from conftest import Server
from kill_loop import kill_loop, rounds
from pymongo.errors import PyMongoError

# SHALE_KILL_ROUNDS=N runs N rounds (kill_loop.py).
ROUNDS = rounds(4)
WRITERS = 3


def writer(client, w, acked, stop):
    db = client.crash
    i = 0
    while not stop.is_set():
        txn = f"{w}-{i}"
        try:
            with client.start_session() as s:
                s.start_transaction()
                db.docs.insert_many(
                    [{"_id": f"{txn}-{j}", "txn": txn} for j in range(3)], session=s
                )
                db.counters.update_one({"_id": w}, {"$inc": {"n": 1}}, upsert=True, session=s)
                s.commit_transaction()
            acked.add(txn)
        except PyMongoError:
            if stop.is_set():
                return
            time.sleep(0.01)
        i += 1


def test_acknowledged_transactions_survive_kill_9_whole(tmp_path):
    rng = random.Random(0x5EED)
    data = tmp_path / "data"
    data.mkdir()
    acked = set()
    committed = []

    def writers(server, round_no, stop):
        client = server.client()
        # Writers are named by round, so transaction ids never repeat across rounds.
        bodies = [
            (lambda w=w: writer(client, f"{w}r{round_no}", acked, stop)) for w in range(WRITERS)
        ]
        return [client], bodies

    def check(server, _round):
        with server.client() as c:
            committed.append(check_round(c, acked))

    kill_loop(Server(data), lambda _port: Server(data), writers, check, ROUNDS, rng)
    assert committed[-1] > 0 and len(acked) > 0


def check_round(client, acked):
    """The checks of the module's docstring; writers are named `<n>r<round>`, their
    transactions `<writer>-<i>`. Returns how many transactions are there."""
    db = client.crash
    by_txn = {}
    for d in db.docs.find({}, {"txn": 1}):
        by_txn[d["txn"]] = by_txn.get(d["txn"], 0) + 1
    torn = {t: n for t, n in by_txn.items() if n != 3}
    assert not torn, f"transactions with some of their documents: {torn}"
    missing = acked - set(by_txn)
    assert not missing, f"acknowledged transactions lost: {sorted(missing)[:10]}"
    writers = {t.rsplit("-", 1)[0] for t in by_txn}
    for w in writers:
        present = sum(1 for t in by_txn if t.rsplit("-", 1)[0] == w)
        counter = db.counters.find_one({"_id": w})
        assert counter is not None and counter["n"] == present, f"writer {w}: {counter} vs {present}"
    assert db.counters.count_documents({}) == len(writers)
    for name in db.list_collection_names():
        assert db.command("validate", name)["valid"] is True, name
    return len(by_txn)
