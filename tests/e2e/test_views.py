"""Views through pymongo: created with `create`/`viewOn` (pymongo's `create_collection` and
`db.command("create", ...)`), read with find, count, distinct and aggregate — each checked
against the same pipeline evaluated in Python over the base documents — refused for writes
with CommandNotSupportedOnView (166), listed as `type: "view"`, dropped, nested, and kept
across a restart."""

import random

import pytest
from pymongo.errors import OperationFailure

from conftest import Server


def base_docs(n=60):
    rng = random.Random(11)
    return [{"_id": i, "g": rng.randrange(4), "x": rng.randrange(100)} for i in range(n)]


def make(db):
    docs = base_docs()
    db.base.insert_many(docs)
    # v1: x >= 30 with a computed field; v2 (on v1): g != 0.
    db.create_collection("v1", viewOn="base", pipeline=[
        {"$match": {"x": {"$gte": 30}}}, {"$addFields": {"y": {"$multiply": ["$x", 2]}}},
    ])
    db.command("create", "v2", viewOn="v1", pipeline=[{"$match": {"g": {"$ne": 0}}}])
    v1 = [dict(d, y=d["x"] * 2) for d in docs if d["x"] >= 30]
    v2 = [d for d in v1 if d["g"] != 0]
    return v1, v2


def test_reads_on_views_match_the_pipeline_run_by_hand(db):
    v1, v2 = make(db)
    assert sorted(db.v1.find(), key=lambda d: d["_id"]) == v1
    assert list(db.v2.find({"x": {"$lt": 80}}, sort=[("x", -1), ("_id", 1)], skip=2, limit=5)) == \
        sorted([d for d in v2 if d["x"] < 80], key=lambda d: (-d["x"], d["_id"]))[2:7]
    assert list(db.v2.find({}, {"y": 1, "_id": 0}, sort=[("_id", 1)])) == [{"y": d["y"]} for d in v2]
    assert db.v2.count_documents({}) == len(v2)
    assert db.v2.estimated_document_count() == len(v2)
    assert db.v1.count_documents({"g": 1}) == len([d for d in v1 if d["g"] == 1])
    assert sorted(db.v2.distinct("g")) == sorted({d["g"] for d in v2})
    got = {d["_id"]: d["n"] for d in db.v2.aggregate([{"$group": {"_id": "$g", "n": {"$sum": 1}}}])}
    want = {}
    for d in v2:
        want[d["g"]] = want.get(d["g"], 0) + 1
    assert got == want
    # A $lookup from a view reads the view.
    db.keys.insert_one({"_id": "k", "g": 1})
    joined = list(db.keys.aggregate([{"$lookup": {"from": "v2", "localField": "g", "foreignField": "g", "as": "m"}}]))
    assert len(joined[0]["m"]) == len([d for d in v2 if d["g"] == 1])


def test_views_are_read_only(db):
    make(db)
    for op in [
        lambda: db.v1.insert_one({"_id": "new"}),
        lambda: db.v1.update_one({}, {"$set": {"a": 1}}),
        lambda: db.v1.update_one({"_id": "up"}, {"$set": {"a": 1}}, upsert=True),
        lambda: db.v1.delete_many({}),
        lambda: db.v1.find_one_and_delete({}),
        lambda: db.v1.create_index("x"),
        lambda: db.v1.index_information(),
        lambda: db.v1.rename("renamed"),
        lambda: db.base.aggregate([{"$out": "v1"}]),
        lambda: db.base.aggregate([{"$merge": "v1"}]),
    ]:
        with pytest.raises(OperationFailure) as e:
            op()
        assert e.value.code == 166, e.value.details
    # The base is untouched.
    assert db.base.count_documents({}) == len(base_docs())


def test_listing_and_dropping(db):
    make(db)
    views = {c["name"]: c for c in db.list_collections() if c["type"] == "view"}
    assert set(views) == {"v1", "v2"}
    assert views["v2"]["options"] == {"viewOn": "v1", "pipeline": [{"$match": {"g": {"$ne": 0}}}]}
    assert views["v2"]["info"]["readOnly"] is True
    assert {c["name"]: c["type"] for c in db.list_collections(nameOnly=True)}["v1"] == "view"
    assert sorted(db.list_collection_names(filter={"type": "view"})) == ["v1", "v2"]
    db.drop_collection("v2")
    assert "v2" not in db.list_collection_names()
    with pytest.raises(OperationFailure) as e:
        db.command("create", "v1")
    assert e.value.code == 48
    with pytest.raises(OperationFailure) as e:
        db.command("create", "base", viewOn="v1")
    assert e.value.code == 48


@pytest.mark.parametrize("kwargs,code", [
    ({"viewOn": 1}, 14),
    ({"viewOn": ""}, 2),
    ({"viewOn": "base", "pipeline": {}}, 14),
    ({"viewOn": "base", "pipeline": [{"$out": "x"}]}, 167),
    ({"viewOn": "base", "pipeline": [{"$nope": 1}]}, 40324),
    ({"viewOn": "base", "capped": True}, 72),
    ({"pipeline": []}, 72),
], ids=["viewOn-type", "viewOn-empty", "pipeline-type", "pipeline-out", "pipeline-bad-stage",
        "capped", "pipeline-without-viewOn"])
def test_create_refusals(db, kwargs, code):
    with pytest.raises(OperationFailure) as e:
        db.command("create", "v", **kwargs)
    assert e.value.code == code, e.value.details


def test_cycles_and_depth_are_refused(db):
    db.command("create", "a", viewOn="b")
    db.command("create", "b", viewOn="c")
    with pytest.raises(OperationFailure) as e:
        db.command("create", "c", viewOn="a")
    assert e.value.code == 5
    db.base.insert_one({"_id": 1})
    prev = "base"
    for i in range(19):
        db.command("create", f"d{i}", viewOn=prev)
        prev = f"d{i}"
    assert list(db[prev].find()) == [{"_id": 1}]
    with pytest.raises(OperationFailure) as e:
        db.command("create", "too_deep", viewOn=prev)
    assert e.value.code == 165


def test_a_view_on_a_missing_collection_is_empty(db):
    db.command("create", "v", viewOn="nothing")
    assert list(db.v.find()) == []
    assert db.v.count_documents({}) == 0


def test_views_survive_a_restart(tmp_path):
    srv = Server(tmp_path / "data")
    try:
        c = srv.client()
        c.t.base.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 5}])
        c.t.command("create", "big", viewOn="base", pipeline=[{"$match": {"x": {"$gt": 2}}}])
        c.close()
        assert srv.stop() == 0
        srv = Server(tmp_path / "data")
        c = srv.client()
        assert list(c.t.big.find()) == [{"_id": 2, "x": 5}]
        assert [x["type"] for x in c.t.list_collections(filter={"name": "big"})] == ["view"]
        c.close()
    finally:
        srv.stop()
