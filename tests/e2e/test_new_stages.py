"""Aggregation stages and expressions added for issue 27 item 5: `$sample` (N documents at
random without repeats, all of them when there are fewer), `$unionWith` (the input, then
another collection through its sub-pipeline), `$bucket` (groups by boundaries, mongod's
`$group` + `$switch` rewrite), and the `$switch`, `$map`, `$filter` and `$reduce`
expressions; each with mongod's codes."""

import pytest
from pymongo.errors import OperationFailure


def test_a_sample_is_drawn_without_repeats(coll):
    coll.insert_many([{"_id": i, "even": i % 2 == 0} for i in range(200)])
    got = [d["_id"] for d in coll.aggregate([{"$sample": {"size": 20}}])]
    assert len(got) == 20 and len(set(got)) == 20 and all(0 <= i < 200 for i in got)
    evens = [d["_id"] for d in coll.aggregate([{"$match": {"even": True}}, {"$sample": {"size": 5}}])]
    assert len(evens) == 5 and all(i % 2 == 0 for i in evens)
    everything = [d["_id"] for d in coll.aggregate([{"$sample": {"size": 1000}}])]
    assert sorted(everything) == list(range(200))
    # Two draws of 20 from 200 are the same set with probability ~ 1e-26.
    again = [d["_id"] for d in coll.aggregate([{"$sample": {"size": 20}}])]
    assert set(again) != set(got)


@pytest.mark.parametrize(
    "spec, code",
    [(5, 28745), ({"size": "x"}, 28746), ({"size": -1}, 28747), ({"size": 1, "n": 1}, 28748), ({}, 28749)],
)
def test_bad_specs_get_mongods_codes(coll, spec, code):
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate([{"$sample": spec}]))
    assert e.value.code == code


def test_union_with_adds_another_collection_after_the_input(db):
    db["a"].insert_many([{"_id": i, "src": "a"} for i in range(3)])
    db["b"].insert_many([{"_id": i, "src": "b"} for i in range(4)])
    got = list(db["a"].aggregate([{"$unionWith": "b"}]))
    assert [d["src"] for d in got] == ["a"] * 3 + ["b"] * 4
    got = list(db["a"].aggregate([
        {"$match": {"_id": {"$lt": 2}}},
        {"$unionWith": {"coll": "b", "pipeline": [{"$match": {"_id": {"$gte": 2}}}, {"$project": {"src": 1}}]}},
        {"$group": {"_id": "$src", "n": {"$sum": 1}}},
        {"$sort": {"_id": 1}},
    ]))
    assert got == [{"_id": "a", "n": 2}, {"_id": "b", "n": 2}]
    assert len(list(db["a"].aggregate([{"$unionWith": "missing"}]))) == 3
    with pytest.raises(OperationFailure) as e:
        list(db["a"].aggregate([{"$unionWith": {"coll": "b", "pipeline": [{"$out": "c"}]}}]))
    assert e.value.code == 31441


def test_bucket_groups_by_boundaries_with_a_default(coll):
    coll.insert_many([{"price": p} for p in [1, 5, 12, 7, 30, 0, -4]])
    got = list(coll.aggregate([
        {"$bucket": {"groupBy": "$price", "boundaries": [0, 5, 10, 20], "default": "other",
                     "output": {"n": {"$sum": 1}, "top": {"$max": "$price"}}}},
    ]))
    assert got == [
        {"_id": 0, "n": 2, "top": 1},
        {"_id": 5, "n": 2, "top": 7},
        {"_id": 10, "n": 1, "top": 12},
        {"_id": "other", "n": 2, "top": 30},
    ]
    switched = list(coll.aggregate([
        {"$project": {"_id": 0, "size": {"$switch": {"branches": [
            {"case": {"$lt": ["$price", 0]}, "then": "negative"},
            {"case": {"$lt": ["$price", 10]}, "then": "small"}], "default": "large"}}}},
        {"$group": {"_id": "$size", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}},
    ]))
    assert switched == [{"_id": "large", "n": 2}, {"_id": "negative", "n": 1}, {"_id": "small", "n": 4}]
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate([{"$bucket": {"groupBy": "$price", "boundaries": [0, 10]}}]))
    assert e.value.code == 40066


def test_map_filter_and_reduce_in_a_projection_and_a_filter(coll):
    coll.insert_many([{"_id": 1, "xs": [1, 2, 3, 4]}, {"_id": 2, "xs": [10]}, {"_id": 3}])
    got = list(coll.aggregate([{"$project": {
        "doubled": {"$map": {"input": "$xs", "as": "x", "in": {"$multiply": ["$$x", 2]}}},
        "big": {"$filter": {"input": "$xs", "cond": {"$gte": ["$$this", 3]}, "limit": 1}},
        "sum": {"$reduce": {"input": "$xs", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}},
    }}, {"$sort": {"_id": 1}}]))
    assert got == [
        {"_id": 1, "doubled": [2, 4, 6, 8], "big": [3], "sum": 10},
        {"_id": 2, "doubled": [20], "big": [10], "sum": 10},
        {"_id": 3, "doubled": None, "big": None, "sum": None},
    ]
    # In a find filter through $expr.
    ids = [d["_id"] for d in coll.find({"$expr": {"$gt": [
        {"$size": {"$ifNull": [{"$filter": {"input": "$xs", "cond": {"$lt": ["$$this", 3]}}}, []]}}, 1]}})]
    assert ids == [1]
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate([{"$project": {"m": {"$map": {"input": 5, "in": 1}}}}]))
    assert e.value.code == 16883


def test_std_dev_and_merge_objects_accumulators(coll):
    coll.insert_many([{"g": 1, "v": v, "o": {f"k{v}": v}} for v in [2, 4, 4, 4, 5, 5, 7, 9]])
    (row,) = coll.aggregate([{"$group": {
        "_id": "$g", "pop": {"$stdDevPop": "$v"}, "samp": {"$stdDevSamp": "$v"},
        "merged": {"$mergeObjects": "$o"}}}])
    assert row["pop"] == 2.0
    assert abs(row["samp"] - (32 / 7) ** 0.5) < 1e-12
    assert row["merged"] == {"k2": 2, "k4": 4, "k5": 5, "k7": 7, "k9": 9}
