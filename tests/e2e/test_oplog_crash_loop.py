"""A kill -9 loop on a `--replSet` member under concurrent writes of every kind (issue 24
items 5 and 10, docs/design-oplog.md O2/O8): plain and retryable inserts, updates and
deletes, and multi-document transactions. The server is killed at a random moment,
restarted, and the oplog is replayed from empty over `crash.*`: the documents it gives must
be exactly the documents stored (no change without its entry, no entry without its
change), every acknowledged write must be there, and the oplog's timestamps must be unique
and increasing across restarts. DDL runs in the loop too (create, implicit creates by an
insert and by createIndexes, createIndexes, collMod, rename, drop on `ddlk.*`): the `c`
entries replayed must give exactly the catalog (each collection with its UUID, its indexes
and its validator), since each commits with its catalog change. Then the writers go on, and
the next kill comes."""

import random
import time

from conftest import Server
from kill_loop import kill_loop
from pymongo.errors import PyMongoError

ROUNDS = 4
SET = "rs0"


def plain_writer(client, name, acked, stop):
    """Inserts, `$inc`s and deletes through single statements."""
    coll = client.crash.docs
    rng = random.Random(name)
    i = 0
    while not stop.is_set():
        key = f"{name}-{i}"
        try:
            coll.insert_one({"_id": key, "n": 0, "w": name})
            acked.add(key)
            coll.update_one({"_id": key}, {"$inc": {"n": 1}, "$set": {"s": "x" * rng.randint(0, 40)}})
            if rng.random() < 0.3:
                acked.discard(key)  # a delete cut off by the kill may or may not be there
                coll.delete_one({"_id": key})
        except PyMongoError:
            if stop.is_set():
                return
            time.sleep(0.01)
        i += 1


def txn_writer(client, name, acked, stop):
    """Transactions that insert two documents and bump a counter."""
    db = client.crash
    i = 0
    while not stop.is_set():
        key = f"{name}-{i}"
        try:
            with client.start_session() as s:
                s.start_transaction()
                db.docs.insert_many([{"_id": f"{key}-{j}", "t": key} for j in range(2)], session=s)
                db.counters.update_one({"_id": name}, {"$inc": {"n": 1}}, upsert=True, session=s)
                s.commit_transaction()
            acked.add(f"{key}-0")
        except PyMongoError:
            if stop.is_set():
                return
            time.sleep(0.01)
        i += 1


def ddl_writer(client, name, stop):
    """Every kind of collection DDL, over and over, on the `ddlk` database."""
    db = client.ddlk
    i = 0
    while not stop.is_set():
        c = f"{name}-{i}"
        try:
            db.create_collection(c)
            db[c].create_index("a", name="a_1")
            db.command("collMod", c, validator={"a": {"$exists": True}})
            db[c].rename(f"{c}-r")
            if i % 2:
                db.drop_collection(f"{c}-r")
            db[f"{c}-imp"].insert_one({"_id": 1})
            db[f"{c}-ci"].create_index("b", name="b_1")
            if i % 3 == 0:
                db[f"{c}-ci"].drop_index("b_1")
        except PyMongoError:
            if stop.is_set():
                return
            time.sleep(0.01)
        i += 1


def replay_catalog(entries):
    """The `ddlk` collections the `c` entries say exist: {name: (uuid, indexes, validator)}."""
    colls = {}
    for e in entries:
        if e["op"] != "c" or e["ns"] != "ddlk.$cmd":
            continue
        o, ui = e["o"], e.get("ui")
        kind = next(iter(o))
        if kind == "create":
            assert o["create"] not in colls, f"created twice: {o}"
            colls[o["create"]] = (ui, set(), False)
        elif kind == "drop":
            assert colls.pop(o["drop"], None) is not None, f"dropped unknown: {o}"
        elif kind == "renameCollection":
            src, dst = o["renameCollection"].split(".", 1)[1], o["to"].split(".", 1)[1]
            colls[dst] = colls.pop(src)
        elif kind == "createIndexes":
            colls[o["createIndexes"]][1].add(o["name"])
        elif kind == "dropIndexes":
            colls[o["dropIndexes"]][1].discard(o["index"])
        elif kind == "collMod":
            u, idx, _ = colls[o["collMod"]]
            colls[o["collMod"]] = (u, idx, "validator" in o)
    return colls


def stored_catalog(client):
    """The same, from the catalog: listCollections and listIndexes."""
    out = {}
    for info in client.ddlk.list_collections():
        name = info["name"]
        indexes = {i["name"] for i in client.ddlk[name].list_indexes()} - {"_id_"}
        out[name] = (info["info"]["uuid"], indexes, "validator" in info["options"])
    return out


def apply_diff(doc, diff):
    """Applies a `$v: 2` diff in place: `d`, `u`, `i`, and sub-diffs `s<field>` (arrays:
    `a: true`, `l` the new length, `u<i>`/`s<i>` per element)."""
    for k in diff.get("d", {}):
        doc.pop(k, None)
    for k, v in diff.get("u", {}).items():
        doc[k] = v
    for k, v in diff.get("i", {}).items():
        doc[k] = v
    for k, sub in diff.items():
        if len(k) > 1 and k[0] == "s":
            apply_sub(doc, k[1:], sub)


def apply_sub(parent, key, sub):
    if not sub.get("a"):
        apply_diff(parent[key], sub)
        return
    arr = parent[key]
    if "l" in sub:
        del arr[sub["l"]:]
    for k, v in sub.items():
        if k in ("a", "l"):
            continue
        i = int(k[1:])
        if k[0] == "u":
            arr.extend([None] * (i + 1 - len(arr)))
            arr[i] = v
        else:
            apply_sub(arr, i, v)


def apply(state, op):
    """Applies one oplog operation to `state` ({ns: {_id: doc}})."""
    kind, ns = op["op"], op["ns"]
    if kind == "c":
        if "applyOps" in op["o"]:
            for inner in op["o"]["applyOps"]:
                apply(state, inner)
        elif "drop" in op["o"]:
            state.pop(f"{ns[: -len('.$cmd')]}.{op['o']['drop']}", None)
        return
    if kind == "n" or not ns.startswith("crash."):
        return
    docs = state.setdefault(ns, {})
    if kind == "i":
        docs[op["o"]["_id"]] = dict(op["o"])
    elif kind == "d":
        docs.pop(op["o"]["_id"], None)
    elif kind == "u":
        key = op["o2"]["_id"]
        if op["o"].get("$v") == 2:
            apply_diff(docs[key], op["o"]["diff"])
        else:
            docs[key] = dict(op["o"])


def check_round(client, acked, last_seen):
    """Replays the whole oplog and compares; returns the newest `ts`."""
    entries = list(client.local["oplog.rs"].find().sort("$natural", 1))
    stamps = [e["ts"] for e in entries]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps), "ts order"
    assert last_seen is None or stamps[-1] >= last_seen, "ts went back across a restart"
    state = {}
    for e in entries:
        apply(state, e)
    for name in ["docs", "counters"]:
        stored = {d["_id"]: d for d in client.crash[name].find()}
        replayed = state.get(f"crash.{name}", {})
        missing = set(stored) - set(replayed)
        extra = set(replayed) - set(stored)
        assert not missing, f"{name}: changes without entries: {sorted(missing)[:5]}"
        assert not extra, f"{name}: entries without changes: {sorted(extra)[:5]}"
        differ = [k for k in stored if stored[k] != replayed[k]]
        assert not differ, f"{name}: replay differs for {differ[:5]}: {stored[differ[0]]} vs {replayed[differ[0]]}"
    docs = {d["_id"] for d in client.crash.docs.find({}, {"_id": 1})}
    lost = set(acked) - docs
    assert not lost, f"acknowledged writes lost: {sorted(lost)[:5]}"
    replayed, stored = replay_catalog(entries), stored_catalog(client)
    missing = sorted(set(stored) - set(replayed))
    extra = sorted(set(replayed) - set(stored))
    assert not missing, f"collections without their create entry: {missing[:5]}"
    assert not extra, f"entries without their catalog change: {extra[:5]}"
    differ = [n for n in stored if stored[n] != replayed[n]]
    assert not differ, f"catalog differs from its entries: {[(stored[n], replayed[n]) for n in differ[:3]]}"
    return stamps[-1], len(stored)


def test_the_oplog_agrees_with_the_data_after_kill_9(tmp_path):
    rng = random.Random(0x0F106)
    data = tmp_path / "data"
    data.mkdir()
    server = Server(data, args=["--replSet", SET])
    with server.client() as c:
        c.admin.command("replSetInitiate")
    acked = set()
    last = [None]
    ddl_colls = [0]

    def writers(srv, round_no, stop):
        retrying = srv.client()
        plain = srv.client(retryWrites=False)
        bodies = [
            lambda: plain_writer(retrying, f"r{round_no}", acked, stop),
            lambda: plain_writer(plain, f"p{round_no}", acked, stop),
            lambda: txn_writer(retrying, f"t{round_no}", acked, stop),
            lambda: ddl_writer(plain, f"d{round_no}", stop),
        ]
        return [retrying, plain], bodies

    def restart(port):
        # The same port: the stored config names this member by its address.
        return Server(data, port=port, args=["--replSet", SET])

    def check(srv, _round):
        with srv.client() as c:
            deadline = time.monotonic() + 10
            while not c.admin.command("hello").get("isWritablePrimary"):
                assert time.monotonic() < deadline, c.admin.command("hello")
                time.sleep(0.1)
            last[0], ddl_colls[0] = check_round(c, acked, last[0])

    kill_loop(server, restart, writers, check, ROUNDS, rng, run_s=(0.7, 1.5))
    assert last[0] is not None and len(acked) > 0
    assert ddl_colls[0] > 0, "the DDL writer made no collection"
