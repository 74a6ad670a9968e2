"""The server-level kill -9 loop of issue 29 item 8: journaled (`j: true`) inserts, `$inc`
updates whose acknowledged count the client keeps, deletes, and an index build (the
previous round's index dropped, a new one built) run against `shale serve`; the server is
SIGKILLed at a random moment, restarted, and checked:
- every acknowledged insert is there unless an acknowledged delete removed it;
- nothing whose delete was acknowledged comes back;
- each counter is at least its acknowledged `$inc`s and at most those plus the ones whose
  reply the kill cut off;
- an acknowledged index build is there and an acknowledged drop does not come back; every
  index counts as many entries as there are documents, and `validate` passes.
What a kill left uncertain (a reply never read) is settled by what the check sees, so the
bounds stay exact round after round.

10 rounds here (scripts/test.sh runs the e2e suite); the longer run of docs/operations.md:
`SHALE_KILL_ROUNDS=100 pytest -q test_kill_loop.py`."""

import random
import threading
import time

from conftest import Server
from kill_loop import kill_loop, rounds
from pymongo.errors import PyMongoError
from pymongo.write_concern import WriteConcern

COUNTERS = 5
PAD = "p" * 100


class Model:
    """What the client was told, under one lock (the writers run on threads)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.present = set()  # acknowledged inserts not deleted since
        self.maybe = set()  # an insert or delete whose reply was lost
        self.deleted = set()  # acknowledged deletes
        self.incs = [0] * COUNTERS  # counters' values known for certain
        self.unsure = [0] * COUNTERS  # `$inc`s whose reply was lost
        self.indexes = set()  # index names whose build was acknowledged, not dropped
        self.dropped = set()  # index names whose drop was acknowledged


def inserter(coll, name, model, stop):
    i = 0
    while not stop.is_set():
        key = f"{name}-{i}"
        i += 1
        try:
            coll.insert_one({"_id": key, "x": i, "pad": PAD})
            with model.lock:
                model.present.add(key)
        except PyMongoError:
            with model.lock:
                model.maybe.add(key)
            if stop.is_set():
                return
            time.sleep(0.01)


def incrementer(counters, rng, model, stop):
    while not stop.is_set():
        c = rng.randrange(COUNTERS)
        with model.lock:
            model.unsure[c] += 1
        try:
            counters.update_one({"_id": c}, {"$inc": {"n": 1}})
            with model.lock:
                model.unsure[c] -= 1
                model.incs[c] += 1
        except PyMongoError:
            if stop.is_set():
                return
            time.sleep(0.01)


def deleter(coll, rng, model, stop):
    while not stop.is_set():
        with model.lock:
            victims = sorted(model.present)
            if not victims:
                key = None
            else:
                key = victims[rng.randrange(len(victims))]
                model.present.discard(key)
                model.maybe.add(key)
        if key is None:
            time.sleep(0.02)
            continue
        try:
            coll.delete_one({"_id": key})
            with model.lock:
                model.maybe.discard(key)
                model.deleted.add(key)
        except PyMongoError:
            if stop.is_set():
                return
            time.sleep(0.01)
        time.sleep(0.005)


def indexer(coll, round_no, model, stop):
    """Drops the indexes of earlier rounds, then builds this round's."""
    with model.lock:
        old = sorted(model.indexes)
    try:
        for name in old:
            with model.lock:
                model.indexes.discard(name)
            coll.drop_index(name)
            with model.lock:
                model.dropped.add(name)
        name = f"build_{round_no}"
        coll.create_index([("x", 1), (f"y{round_no}", 1)], name=name)
        with model.lock:
            model.indexes.add(name)
    except PyMongoError:
        pass


def check(server, model):
    with server.client() as c:
        db = c.crash
        stored = {d["_id"] for d in db.docs.find({}, {"_id": 1})}
        counters = {d["_id"]: d["n"] for d in db.counters.find()}
        names = {i["name"] for i in db.docs.list_indexes()}
        with model.lock:
            lost = model.present - stored
            assert not lost, f"acknowledged inserts lost: {sorted(lost)[:5]}"
            back = model.deleted & stored
            assert not back, f"acknowledged deletes came back: {sorted(back)[:5]}"
            unknown = stored - model.present - model.maybe
            assert not unknown, f"documents nobody wrote: {sorted(unknown)[:5]}"
            for k in range(COUNTERS):
                low, high = model.incs[k], model.incs[k] + model.unsure[k]
                assert low <= counters[k] <= high, f"counter {k}: {counters[k]} not in [{low}, {high}]"
                model.incs[k], model.unsure[k] = counters[k], 0
            missing = model.indexes - names
            assert not missing, f"acknowledged index builds lost: {missing}"
            revived = model.dropped & names
            assert not revived, f"acknowledged index drops came back: {revived}"
            # Settle what the kill left open: the check saw it, so it is known now.
            model.present = (model.present | (model.maybe & stored)) - model.deleted
            model.deleted |= model.maybe - stored
            model.maybe = set()
            model.indexes = {n for n in names if n.startswith("build_")}
        total = db.docs.count_documents({})
        assert total == len(stored)
        for name in names:
            by_index = db.docs.count_documents({}, hint=name)
            assert by_index == total, f"index {name} has {by_index} entries for {total} documents"
        for coll in ("docs", "counters"):
            result = db.command("validate", coll)
            assert result["valid"] is True, result


def test_nothing_acknowledged_is_lost_and_nothing_deleted_comes_back(tmp_path):
    rng = random.Random(0x29_08)
    data = tmp_path / "data"
    data.mkdir()
    model = Model()
    server = Server(data)
    with server.client() as c:
        j = c.crash.get_collection("counters", write_concern=WriteConcern(j=True))
        j.insert_many([{"_id": k, "n": 0} for k in range(COUNTERS)])

    def writers(srv, round_no, stop):
        client = srv.client()
        db = client.get_database("crash", write_concern=WriteConcern(j=True))
        seeded = random.Random(rng.random())
        bodies = [
            lambda: inserter(db.docs, f"a{round_no}", model, stop),
            lambda: inserter(db.docs, f"b{round_no}", model, stop),
            lambda: incrementer(db.counters, random.Random(seeded.random()), model, stop),
            lambda: deleter(db.docs, random.Random(seeded.random()), model, stop),
            lambda: indexer(db.docs, round_no, model, stop),
        ]
        return [client], bodies

    n = rounds(10)
    kill_loop(
        server,
        restart=lambda port: Server(data),
        writers=writers,
        check=lambda srv, _round: check(srv, model),
        n_rounds=n,
        rng=rng,
        run_s=(0.4, 1.2),
    )
    assert model.present, "no insert was acknowledged"
    assert sum(model.incs) > 0, "no $inc was acknowledged"
    print(
        f"kill loop: {n} kills; {len(model.present)} documents stored, "
        f"{len(model.deleted)} deleted, {sum(model.incs)} $incs counted, "
        f"{len(model.dropped)} index drops; nothing lost or resurrected"
    )
