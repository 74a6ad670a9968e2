"""$bucketAuto, $redact and $graphLookup through pymongo against the real binary, with
MongoDB 7.0's results and error codes (issue 27, item 5)."""

import pytest
from bson import Int64
from pymongo.errors import OperationFailure


def run(coll, pipeline, **kwargs):
    return list(coll.aggregate(pipeline, **kwargs))


def code_of(coll, pipeline):
    with pytest.raises(OperationFailure) as failure:
        run(coll, pipeline)
    return failure.value.code


def test_bucket_auto_cuts_like_mongod(coll):
    coll.insert_many([{"_id": i, "x": x} for i, x in enumerate([1, 1, 1, 2, 3, 4, 5, 5, 6])])
    got = run(coll, [{"$bucketAuto": {"groupBy": "$x", "buckets": 3}}])
    assert got == [
        {"_id": {"min": 1, "max": 2}, "count": 3},
        {"_id": {"min": 2, "max": 5}, "count": 3},
        {"_id": {"min": 5, "max": 6}, "count": 3},
    ]
    totals = run(
        coll,
        [{"$bucketAuto": {"groupBy": "$x", "buckets": 2, "output": {"sum": {"$sum": "$x"}}}}],
    )
    # round(9 / 2) = 5 documents (C++ rounds halves away from zero): 1 1 1 2 3 | 4 5 5 6.
    assert [b["sum"] for b in totals] == [8, 20]


def test_bucket_auto_granularity(coll):
    coll.insert_many([{"_id": x, "x": x} for x in range(1, 11)])
    got = run(coll, [{"$bucketAuto": {"groupBy": "$x", "buckets": 3, "granularity": "POWERSOF2"}}])
    assert got == [
        {"_id": {"min": 0.5, "max": 4}, "count": 3},
        {"_id": {"min": 4, "max": 8}, "count": 4},
        {"_id": {"min": 8, "max": 16}, "count": 3},
    ]
    e6 = run(coll, [{"$bucketAuto": {"groupBy": "$x", "buckets": 2, "granularity": "E6"}}])
    bounds = [(b["_id"]["min"], b["_id"]["max"], b["count"]) for b in e6]
    assert bounds == [
        (pytest.approx(0.68), pytest.approx(6.8), 6),
        (pytest.approx(6.8), 15.0, 4),
    ]


def test_bucket_auto_errors(coll):
    coll.insert_many([{"x": -1}, {"x": "a"}])
    assert code_of(coll, [{"$bucketAuto": 1}]) == 40240
    assert code_of(coll, [{"$bucketAuto": {"groupBy": "x", "buckets": 2}}]) == 40239
    assert code_of(coll, [{"$bucketAuto": {"groupBy": "$x", "buckets": 0}}]) == 40243
    assert code_of(coll, [{"$bucketAuto": {"groupBy": "$x"}}]) == 40246
    assert code_of(coll, [{"$bucketAuto": {"groupBy": "$x", "buckets": 2, "granularity": "R7"}}]) == 40257
    assert code_of(coll, [{"$bucketAuto": {"groupBy": "$x", "buckets": 2, "granularity": "R5"}}]) in (
        40258,
        40260,
    )


def test_redact_prunes_levels(coll):
    coll.insert_many(
        [
            {"_id": 1, "level": 1, "sub": {"level": 3, "x": 1}, "arr": [{"level": 1, "y": 1}, {"level": 5}, 7]},
            {"_id": 2, "level": 5},
        ]
    )
    expr = {"$cond": [{"$gt": [{"$ifNull": ["$level", 0]}, 2]}, "$$PRUNE", "$$DESCEND"]}
    got = run(coll, [{"$redact": expr}])
    assert got == [{"_id": 1, "level": 1, "arr": [{"level": 1, "y": 1}, 7]}]
    assert run(coll, [{"$redact": "$$KEEP"}, {"$count": "n"}]) == [{"n": 2}]
    assert code_of(coll, [{"$redact": "nope"}]) == 17053
    assert code_of(coll, [{"$project": {"a": "$$KEEP"}}]) == 17276


def test_graph_lookup_walks_the_graph(db):
    db.employees.insert_many(
        [
            {"_id": 1, "name": "Dev"},
            {"_id": 2, "name": "Eliot", "reportsTo": "Dev"},
            {"_id": 3, "name": "Ron", "reportsTo": "Eliot"},
            {"_id": 4, "name": "Andrew", "reportsTo": "Eliot"},
            {"_id": 5, "name": "Asya", "reportsTo": "Ron"},
            {"_id": 6, "name": "Dan", "reportsTo": "Andrew"},
        ]
    )
    got = run(
        db.employees,
        [
            {"$match": {"name": "Asya"}},
            {
                "$graphLookup": {
                    "from": "employees",
                    "startWith": "$reportsTo",
                    "connectFromField": "reportsTo",
                    "connectToField": "name",
                    "as": "chain",
                    "depthField": "d",
                }
            },
        ],
    )
    chain = sorted((c["name"], c["d"]) for c in got[0]["chain"])
    assert chain == [("Dev", Int64(2)), ("Eliot", Int64(1)), ("Ron", Int64(0))]
    limited = run(
        db.employees,
        [
            {"$match": {"name": "Asya"}},
            {
                "$graphLookup": {
                    "from": "employees",
                    "startWith": "$reportsTo",
                    "connectFromField": "reportsTo",
                    "connectToField": "name",
                    "as": "chain",
                    "maxDepth": 0,
                }
            },
        ],
    )
    assert [c["name"] for c in limited[0]["chain"]] == ["Ron"]


def test_graph_lookup_cycles_and_errors(db):
    db.nodes.insert_many([{"_id": 1, "to": [2]}, {"_id": 2, "to": [3, 1]}, {"_id": 3, "to": [1]}])
    db.start.insert_one({"s": 1})
    spec = {"from": "nodes", "startWith": "$s", "connectFromField": "to", "connectToField": "_id", "as": "r"}
    got = run(db.start, [{"$graphLookup": spec}])
    assert sorted(d["_id"] for d in got[0]["r"]) == [1, 2, 3]
    assert code_of(db.start, [{"$graphLookup": {**spec, "maxDepth": -1}}]) == 40101
    assert code_of(db.start, [{"$graphLookup": {**spec, "bogus": 1}}]) == 40104
    assert code_of(db.start, [{"$graphLookup": {**spec, "from": {"db": "other", "coll": "nodes"}}}]) == 9
    missing = dict(spec)
    del missing["as"]
    assert code_of(db.start, [{"$graphLookup": missing}]) == 40105
