"""Clustering secondary indexes (TokuMX's `clustering: true`, issue 23 item 6) through pymongo
against the real binary: `create_index(keys, clustering=True)` creates one and listIndexes /
index_information return the option; a value that is not a boolean or number is refused
(TypeMismatch 14). Queries, sorts and projections are answered from the index with no fetch
(explain: an IXSCAN stage with `clustering: true`, no FETCH or SORT), with the results a
collection scan gives. Updates (also of fields the index does not cover) and deletes keep
its documents exact (validate passes, hinted reads see the new documents); unique +
clustering refuses duplicates; collStats reports its size; dropIndex removes it; the option
survives a restart; a session transaction reads its own writes through it, others do not,
and an abort leaves it as it was."""

import random

import pytest
from pymongo import ASCENDING, DESCENDING
from pymongo.errors import DuplicateKeyError, OperationFailure

from conftest import Server


def stages(plan):
    """Every stage name of a winning plan, outermost first."""
    out = []
    while plan is not None:
        out.append(plan["stage"])
        if "inputStages" in plan:
            for p in plan["inputStages"]:
                out.extend(stages(p))
            break
        plan = plan.get("inputStage")
    return out


def winning(explain):
    return explain["queryPlanner"]["winningPlan"]


def fill(coll, n=400, seed=23):
    rng = random.Random(seed)
    docs = [
        {"_id": i, "a": rng.randrange(50), "b": rng.choice(["x", "y", "z"]),
         "pad": "p" * rng.randrange(100)}
        for i in range(n)
    ]
    coll.insert_many(docs)
    return docs


def test_create_and_list(coll):
    assert coll.create_index([("a", ASCENDING)], clustering=True) == "a_1"
    got = {i["name"]: i for i in coll.list_indexes()}
    assert got["a_1"] == {"v": 2, "key": {"a": 1}, "name": "a_1", "clustering": True}
    assert coll.index_information()["a_1"]["clustering"] is True
    # Same spec again: nothing to do.
    assert coll.create_index([("a", ASCENDING)], clustering=True) == "a_1"
    assert len(got) == 2


def test_bad_option_values_are_refused(coll):
    with pytest.raises(OperationFailure) as err:
        coll.create_index("a", clustering="yes")
    assert err.value.code == 14
    assert err.value.details["codeName"] == "TypeMismatch"
    # false is no clustering at all (stored like unique: false, i.e. not at all).
    coll.create_index("b", clustering=False)
    assert "clustering" not in coll.index_information()["b_1"]


def test_queries_sorts_and_projections_need_no_fetch(coll):
    docs = fill(coll)
    coll.create_index([("a", ASCENDING), ("b", DESCENDING)], clustering=True)
    # Inclusive bounds: a strict numeric bound also examines the keys equal to it
    # (decimal128 keys are nearest doubles, docs/compat.md), which would count here.
    filt = {"a": {"$gte": 10, "$lte": 19}}
    e = coll.find(filt).explain()
    plan = winning(e)
    assert plan["stage"] == "IXSCAN" and plan["clustering"] is True, plan
    assert plan["indexName"] == "a_1_b_-1"
    assert "FETCH" not in stages(plan)
    stats = e["executionStats"]
    want = sorted((d for d in docs if 10 <= d["a"] <= 19), key=lambda d: d["_id"])
    assert stats["nReturned"] == len(want)
    assert stats["totalKeysExamined"] == stats["totalDocsExamined"] == len(want)
    assert sorted(coll.find(filt), key=lambda d: d["_id"]) == want
    assert list(coll.find(filt).hint([("$natural", 1)]).sort("_id")) == want
    # Sorted in the index's order (or its reverse): no SORT stage either.
    cur = coll.find(filt).sort([("a", DESCENDING), ("b", ASCENDING)])
    assert stages(winning(cur.explain())) == ["IXSCAN"]
    got = [(d["a"], d["b"]) for d in cur]
    assert got == sorted(got, key=lambda t: (-t[0], t[1])) and len(got) == len(want)
    # Projections (covered or not) are computed from the entry's document.
    proj = list(coll.find(filt, {"pad": 1, "_id": 0}).sort("a", ASCENDING))
    assert stages(winning(coll.find(filt, {"pad": 1}).explain())) == ["IXSCAN"]
    assert sorted(p["pad"] for p in proj) == sorted(d["pad"] for d in want)
    assert all(set(p) == {"pad"} for p in proj)
    assert coll.count_documents(filt) == len(want)
    assert sorted(coll.distinct("b", filt)) == sorted({d["b"] for d in want})


def test_updates_and_deletes_keep_it_exact(coll):
    fill(coll)
    coll.create_index("a", clustering=True)
    # No indexed field changes: the clustering entries must still carry the new documents.
    coll.update_many({"a": {"$lt": 25}}, {"$set": {"pad": "new"}})
    coll.update_many({"a": 30}, {"$inc": {"a": 100}})
    coll.replace_one({"_id": 7}, {"a": 3, "pad": "replaced"})
    coll.delete_many({"a": {"$gte": 40, "$lt": 45}})
    coll.find_one_and_update({"_id": 8}, {"$set": {"pad": "fam"}})
    natural = {d["_id"]: d for d in coll.find().hint([("$natural", 1)])}
    hinted = {d["_id"]: d for d in coll.find({"a": {"$gte": 0}}).hint("a_1")}
    assert hinted == natural
    assert coll.find_one({"a": 3, "pad": "replaced"})["_id"] == 7
    assert coll.count_documents({"a": {"$gte": 40, "$lt": 45}}) == 0
    assert all(d["pad"] == "new" for d in coll.find({"a": {"$lt": 25}, "_id": {"$nin": [7, 8]}}))
    v = coll.database.validate_collection(coll.name, full=True)
    assert v["valid"] is True, v
    assert v["keysPerIndex"]["a_1"] == len(natural)


def test_unique_clustering(coll):
    coll.create_index("u", unique=True, clustering=True)
    info = coll.index_information()["u_1"]
    assert info["unique"] is True and info["clustering"] is True
    coll.insert_many([{"_id": i, "u": i * 10, "x": i} for i in range(20)])
    with pytest.raises(DuplicateKeyError) as err:
        coll.insert_one({"_id": 100, "u": 50})
    assert err.value.details["keyPattern"] == {"u": 1}
    assert err.value.details["keyValue"] == {"u": 50}
    with pytest.raises(DuplicateKeyError):
        coll.update_one({"_id": 1}, {"$set": {"u": 20}})
    # Its own key again is no duplicate.
    coll.update_one({"_id": 1}, {"$set": {"u": 10, "x": -1}})
    assert coll.find_one({"u": 10}) == {"_id": 1, "u": 10, "x": -1}
    plan = winning(coll.find({"u": 10}).explain())
    assert plan["stage"] == "IXSCAN" and plan["clustering"] is True and plan["isUnique"] is True
    assert coll.database.validate_collection(coll.name)["valid"] is True


def test_coll_stats_and_drop(coll):
    fill(coll, n=2000)
    coll.create_index("a", clustering=True)
    coll.create_index("b")
    stats = coll.database.command("collStats", coll.name)
    assert set(stats["indexSizes"]) == {"_id_", "a_1", "b_1"}
    assert stats["indexSizes"]["a_1"] > 0
    assert stats["nindexes"] == 3
    coll.drop_index("a_1")
    assert set(coll.index_information()) == {"_id_", "b_1"}
    assert "a_1" not in coll.database.command("collStats", coll.name)["indexSizes"]
    assert "IXSCAN" not in stages(winning(coll.find({"a": 5}).explain()))
    assert coll.database.validate_collection(coll.name)["valid"] is True


def test_survives_a_restart(tmp_path):
    srv = Server(tmp_path / "data")
    try:
        c = srv.client()
        coll = c.test.c
        fill(coll, n=300)
        coll.create_index([("b", ASCENDING), ("a", ASCENDING)], clustering=True)
        c.close()
    finally:
        srv.stop()
    srv = Server(tmp_path / "data")
    try:
        c = srv.client()
        coll = c.test.c
        assert coll.index_information()["b_1_a_1"]["clustering"] is True
        plan = winning(coll.find({"b": "x"}).explain())
        assert plan["stage"] == "IXSCAN" and plan["clustering"] is True
        assert coll.count_documents({"b": "x"}) == len(list(coll.find({"b": "x"}).hint([("$natural", 1)])))
        assert coll.database.validate_collection("c")["valid"] is True
        c.close()
    finally:
        srv.stop()


def test_transactions_see_their_own_writes_and_abort_leaves_it_exact(client, server):
    coll = client.txn.c
    coll.insert_many([{"_id": i, "a": i % 5, "pad": "old"} for i in range(50)])
    coll.create_index("a", clustering=True)
    observer = server.client().txn.c
    with client.start_session() as session:
        session.start_transaction()
        coll.update_many({"a": 2}, {"$set": {"pad": "new"}}, session=session)
        coll.delete_one({"_id": 3}, session=session)
        inside = list(coll.find({"a": {"$in": [2, 3]}}, session=session).hint("a_1"))
        assert sorted(d["_id"] for d in inside if d["pad"] == "new") == list(range(2, 50, 5))
        assert 3 not in {d["_id"] for d in inside}
        # Another client sees the committed documents only, from the same index.
        outside = list(observer.find({"a": 2}).hint("a_1"))
        assert {d["pad"] for d in outside} == {"old"}
        session.abort_transaction()
    assert {d["pad"] for d in coll.find({"a": 2}).hint("a_1")} == {"old"}
    assert coll.count_documents({"_id": 3}) == 1
    with client.start_session() as session:
        session.with_transaction(
            lambda s: coll.update_many({"a": 4}, {"$set": {"pad": "committed"}}, session=s)
        )
    assert {d["pad"] for d in coll.find({"a": 4}).hint("a_1")} == {"committed"}
    assert coll.database.validate_collection("c")["valid"] is True
    observer.database.client.close()
