"""`$out` and `$merge` through pymongo: the target's contents are checked against what a plain
Python evaluation of the same pipeline and merge rules gives, and the refusals carry mongod's
codes. Also `{aggregate: 1}` with `$documents`."""

import random

import pytest
from pymongo.errors import OperationFailure


def ids(docs):
    return sorted(docs, key=lambda d: d["_id"])


def seed(coll, n=40, rng=None):
    rng = rng or random.Random(7)
    docs = [{"_id": i, "g": rng.randrange(5), "x": rng.randrange(100)} for i in range(n)]
    coll.insert_many(docs)
    return docs


def test_out_replaces_the_target_with_the_pipeline_results(db):
    docs = seed(db.src)
    db.dst.insert_many([{"_id": 1000, "old": True}, {"_id": 1, "old": True}])
    db.dst.create_index("x", name="x_1")
    res = list(db.src.aggregate([{"$match": {"x": {"$gte": 50}}}, {"$out": "dst"}]))
    assert res == []
    expected = [d for d in docs if d["x"] >= 50]
    assert ids(db.dst.find()) == ids(expected)
    # The target keeps its indexes.
    assert "x_1" in db.dst.index_information()
    # No temporary collection is left.
    assert not [n for n in db.list_collection_names() if n.startswith("tmp.agg_out")]


def test_out_groups_into_another_database(db, shared_client):
    docs = seed(db.src)
    other = shared_client[db.name + "_o"]
    db.src.aggregate([
        {"$group": {"_id": "$g", "total": {"$sum": "$x"}}},
        {"$out": {"db": other.name, "coll": "sums"}},
    ])
    expected = {}
    for d in docs:
        expected[d["g"]] = expected.get(d["g"], 0) + d["x"]
    assert {d["_id"]: d["total"] for d in other.sums.find()} == expected


def test_out_failure_leaves_the_target_as_it_was(db):
    db.src.insert_many([{"_id": 1, "k": 1}, {"_id": 2, "k": 1}])
    db.dst.insert_one({"_id": "keep"})
    with pytest.raises(OperationFailure) as e:
        # Two documents with the same _id: the second insert into the temporary collection
        # fails, so the target is untouched.
        db.src.aggregate([{"$project": {"_id": "$k"}}, {"$out": "dst"}])
    assert e.value.code == 11000
    assert list(db.dst.find()) == [{"_id": "keep"}]
    assert not [n for n in db.list_collection_names() if n.startswith("tmp.agg_out")]


@pytest.mark.parametrize("pipeline,code", [
    ([{"$out": "a"}, {"$match": {}}], 40601),
    ([{"$merge": {"into": "a"}}, {"$match": {}}], 40601),
    ([{"$out": 1}], 16990),
    ([{"$out": "system.x"}], 17385),
    ([{"$out": {"db": "admin", "coll": "x"}}], 31321),
    ([{"$merge": {"into": {"db": "config", "coll": "x"}}}], 31320),
    ([{"$facet": {"a": [{"$out": "x"}]}}], 40600),
    ([{"$lookup": {"from": "x", "pipeline": [{"$merge": "y"}], "as": "r"}}], 51047),
    ([{"$merge": {"into": "t", "whenMatched": "keepExisting", "whenNotMatched": "fail"}}], 51181),
    ([{"$merge": {"into": "t", "whenMatched": "replace", "let": {"a": 1}}}], 51199),
    ([{"$merge": {"into": "t", "on": "a"}}], 51183),
    ([{"$documents": [{"a": 1}]}], 73),
], ids=["out-not-last", "merge-not-last", "out-type", "out-system", "out-admin",
        "merge-config", "out-in-facet", "merge-in-lookup", "merge-modes", "merge-let",
        "merge-no-unique-index", "documents-on-collection"])
def test_refusals_carry_mongods_codes(db, pipeline, code):
    db.src.insert_one({"_id": 1, "a": 1})
    with pytest.raises(OperationFailure) as e:
        db.src.aggregate(pipeline)
    assert e.value.code == code, e.value.details


def merge_model(target, source, on, when_matched, when_not_matched):
    """The merge rules applied to dicts: the expected target afterwards."""
    out = [dict(d) for d in target]
    for s in source:
        key = tuple(s.get(f) for f in on)
        hit = next((t for t in out if tuple(t.get(f) for f in on) == key), None)
        if hit is not None:
            if when_matched == "replace":
                new = dict(s)
                new["_id"] = hit["_id"]
                out[out.index(hit)] = new
            elif when_matched == "merge":
                hit.update(s)
            elif when_matched == "keepExisting":
                pass
            else:  # the pipeline used below: add the source's x to the target's
                hit["x"] = hit.get("x", 0) + s["x"]
        elif when_not_matched == "insert":
            out.append(dict(s))
    return out


@pytest.mark.parametrize("when_matched", ["replace", "merge", "keepExisting", "pipeline"])
@pytest.mark.parametrize("when_not_matched", ["insert", "discard"])
def test_merge_modes_match_the_model(db, when_matched, when_not_matched):
    if when_matched == "keepExisting" and when_not_matched != "insert":
        pytest.skip("mongod refuses this combination (51181, tested above)")
    rng = random.Random(hash((when_matched, when_not_matched)) & 0xFFFF)
    target = [{"_id": i, "x": rng.randrange(10), "t": True} for i in range(0, 30, 2)]
    source = [{"_id": i, "x": rng.randrange(10), "s": True} for i in range(0, 30, 3)]
    db.dst.insert_many(target)
    db.src.insert_many(source)
    spec = {"into": "dst", "whenNotMatched": when_not_matched}
    spec["whenMatched"] = (
        [{"$set": {"x": {"$add": ["$x", "$$new.x"]}}}] if when_matched == "pipeline" else when_matched
    )
    assert list(db.src.aggregate([{"$merge": spec}])) == []
    expected = merge_model(target, source, ["_id"], when_matched, when_not_matched)
    assert ids(db.dst.find()) == ids(expected)


def test_merge_on_a_unique_index_and_let(db):
    db.dst.create_index([("k", 1), ("j", 1)], unique=True)
    db.dst.insert_many([{"_id": 1, "k": "a", "j": 1, "n": 1}, {"_id": 2, "k": "b", "j": 1, "n": 1}])
    db.src.insert_many([{"_id": 10, "k": "a", "j": 1, "n": 5}, {"_id": 11, "k": "c", "j": 1, "n": 7}])
    db.src.aggregate([
        {"$project": {"_id": 0}},
        {"$merge": {
            "into": "dst", "on": ["j", "k"], "let": {"add": "$n"},
            "whenMatched": [{"$set": {"n": {"$add": ["$n", "$$add"]}}}],
            "whenNotMatched": "insert",
        }},
    ])
    got = {d["k"]: d["n"] for d in db.dst.find()}
    assert got == {"a": 6, "b": 1, "c": 7}
    # The inserted document got an _id of its own.
    assert db.dst.find_one({"k": "c"})["_id"] is not None


def test_merge_fail_modes(db):
    db.dst.insert_one({"_id": 2, "x": 1})
    db.src.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 1}])
    with pytest.raises(OperationFailure) as e:
        db.src.aggregate([{"$merge": {"into": "dst", "whenMatched": "fail"}}])
    assert e.value.code == 11000
    assert e.value.details["keyValue"] == {"_id": 2}
    # The writes before the failure stay, as with mongod.
    assert db.dst.find_one({"_id": 1}) == {"_id": 1, "x": 1}
    db.src.insert_one({"_id": 3, "x": 1})
    with pytest.raises(OperationFailure) as e:
        db.src.aggregate([{"$merge": {"into": "dst", "whenNotMatched": "fail"}}])
    assert e.value.code == 13113
    with pytest.raises(OperationFailure) as e:
        db.src.aggregate([{"$project": {"_id": 0}}, {"$merge": {"into": "dst", "on": "_id"}}])
    assert e.value.code == 51132


def test_merge_into_another_database_creates_it(db, shared_client):
    seed(db.src, n=10)
    other = shared_client[db.name + "_m"]
    db.src.aggregate([{"$merge": {"into": {"db": other.name, "coll": "m"}}}])
    assert other.m.count_documents({}) == 10


def test_database_aggregate_with_documents(db):
    got = list(db.aggregate([{"$documents": [{"a": 1}, {"a": 2}, {"a": 3}]}, {"$match": {"a": {"$gte": 2}}}]))
    assert got == [{"a": 2}, {"a": 3}]
    got = list(db.aggregate([{"$documents": {"$cond": [True, [{"x": 1}, {"x": 2}], []]}}]))
    assert got == [{"x": 1}, {"x": 2}]
    db.aggregate([{"$documents": [{"_id": 1, "v": "a"}]}, {"$merge": {"into": "made"}}])
    assert list(db.made.find()) == [{"_id": 1, "v": "a"}]
    for pipeline, code in [
        ([{"$documents": [1]}], 40228),
        ([{"$documents": "x"}], 5858203),
        ([{"$match": {}}, {"$documents": []}], 40602),
        ([{"$match": {}}], 73),
    ]:
        with pytest.raises(OperationFailure) as e:
            list(db.aggregate(pipeline))
        assert e.value.code == code, pipeline


def test_write_stages_are_refused_in_a_transaction(db, shared_client):
    db.src.insert_one({"_id": 1})
    with shared_client.start_session() as s:
        s.start_transaction()
        with pytest.raises(OperationFailure) as e:
            db.src.aggregate([{"$out": "dst"}], session=s)
        assert e.value.code == 263
