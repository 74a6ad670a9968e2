"""Secondary indexes through pymongo against the real binary: createIndexes (single field,
compound, descending, unique, sparse, partial, multikey), listIndexes and
index_information, dropIndexes by name, by key pattern and all at once, and what MongoDB
7.0 refuses: a duplicate under a unique index (11000 with keyPattern and keyValue), dropping
`_id_` (72 InvalidOptions), an unknown index (27 IndexNotFound), a name or key pattern
clash (86 IndexKeySpecsConflict, 85 IndexOptionsConflict), a unique index over existing
duplicates (11000, and no index is left behind).

explain() must name the index in queryPlanner.winningPlan (an IXSCAN stage with its
indexName) for equality, range, $in and sorted queries; and a seeded random comparison runs
a few hundred queries through every index (hinted) and through a collection scan (hint
{$natural: 1}), which must return the same documents in the same order."""

import random

import pytest
from pymongo import ASCENDING, DESCENDING
from pymongo.errors import DuplicateKeyError, OperationFailure


def specs(coll):
    return {i["name"]: i for i in coll.list_indexes()}


def test_create_single_compound_and_descending(coll):
    assert coll.create_index("a") == "a_1"
    assert coll.create_index([("a", ASCENDING), ("b", DESCENDING)]) == "a_1_b_-1"
    assert coll.create_index([("c", DESCENDING)], name="c_desc") == "c_desc"
    got = specs(coll)
    assert set(got) == {"_id_", "a_1", "a_1_b_-1", "c_desc"}
    assert got["_id_"]["key"] == {"_id": 1}
    assert got["a_1"] == {"v": 2, "key": {"a": 1}, "name": "a_1"}
    assert list(got["a_1_b_-1"]["key"].items()) == [("a", 1), ("b", -1)]
    assert got["c_desc"]["key"] == {"c": -1}


def test_create_indexes_reply(coll):
    reply = coll.database.command("createIndexes", coll.name,
                                  indexes=[{"key": {"x": 1}, "name": "x_1"}])
    assert reply["numIndexesBefore"] == 1 and reply["numIndexesAfter"] == 2
    assert reply["createdCollectionAutomatically"] is True
    again = coll.database.command("createIndexes", coll.name,
                                  indexes=[{"key": {"x": 1}, "name": "x_1"}])
    assert again["numIndexesBefore"] == again["numIndexesAfter"] == 2
    assert again["note"] == "all indexes already exist"


def test_index_information(coll):
    coll.create_index("u", unique=True)
    info = coll.index_information()
    assert info["_id_"]["key"] == [("_id", 1)]
    assert info["u_1"]["key"] == [("u", 1)] and info["u_1"]["unique"] is True


def test_name_and_key_pattern_clashes(coll):
    coll.create_index("a")
    with pytest.raises(OperationFailure) as err:
        coll.create_index("b", name="a_1")
    assert err.value.code == 86
    assert err.value.details["codeName"] == "IndexKeySpecsConflict"
    with pytest.raises(OperationFailure) as err:
        coll.create_index("a", name="other")
    assert err.value.code == 85
    assert err.value.details["codeName"] == "IndexOptionsConflict"


def test_unique_index_refuses_a_duplicate(coll):
    coll.create_index([("a", 1), ("b", 1)], unique=True)
    coll.insert_many([{"_id": 1, "a": 1, "b": 2}, {"_id": 2, "a": 1, "b": 3}])
    with pytest.raises(DuplicateKeyError) as err:
        coll.insert_one({"_id": 3, "a": 1, "b": 2})
    assert err.value.code == 11000
    assert err.value.details["keyPattern"] == {"a": 1, "b": 1}
    assert err.value.details["keyValue"] == {"a": 1, "b": 2}
    with pytest.raises(DuplicateKeyError):
        coll.update_one({"_id": 2}, {"$set": {"b": 2}})
    assert coll.count_documents({}) == 2


def test_unique_index_treats_missing_as_null(coll):
    coll.create_index("a", unique=True)
    coll.insert_one({"_id": 1})
    with pytest.raises(DuplicateKeyError) as err:
        coll.insert_one({"_id": 2})
    assert err.value.details["keyValue"] == {"a": None}


def test_sparse_index(coll):
    coll.create_index("s", sparse=True, unique=True)
    coll.insert_many([{"_id": 1}, {"_id": 2}, {"_id": 3, "s": 1}, {"_id": 4, "s": None}])
    assert specs(coll)["s_1"]["sparse"] is True
    # A hinted sparse index only holds the documents that have the field.
    assert sorted(d["_id"] for d in coll.find({}).hint("s_1")) == [3, 4]
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"_id": 5, "s": 1})


def test_partial_index(coll):
    coll.create_index("a", unique=True, partialFilterExpression={"a": {"$gt": 5}})
    assert specs(coll)["a_1"]["partialFilterExpression"] == {"a": {"$gt": 5}}
    coll.insert_many([{"a": 1}, {"a": 1}, {"a": 10}])
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"a": 10})
    assert coll.count_documents({"a": 1}) == 2
    assert coll.count_documents({"a": {"$gt": 5}}) == 1


def test_multikey_index(coll):
    coll.create_index("tags")
    coll.insert_many([{"_id": 1, "tags": ["x", "y"]}, {"_id": 2, "tags": "x"},
                      {"_id": 3, "tags": []}, {"_id": 4, "tags": [["x"]]}, {"_id": 5}])
    assert sorted(d["_id"] for d in coll.find({"tags": "x"})) == [1, 2]
    assert sorted(d["_id"] for d in coll.find({"tags": ["x"]})) == [4]
    assert sorted(d["_id"] for d in coll.find({"tags": {"$in": ["y", "z"]}})) == [1]
    assert [d["_id"] for d in coll.find({"tags": {"$gte": "x"}}).sort("_id", 1)] == [1, 2]
    assert uses_index(coll.find({"tags": "x"}).explain(), "tags_1")


def test_unique_multikey_index_compares_elements(coll):
    coll.create_index("t", unique=True)
    coll.insert_one({"_id": 1, "t": [1, 2]})
    coll.insert_one({"_id": 2, "t": [3, 3]})
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"_id": 3, "t": [2, 9]})


def test_drop_index_by_name_spec_and_all(coll):
    coll.create_index("a")
    coll.create_index([("b", 1), ("c", -1)])
    coll.create_index("d")
    coll.drop_index("a_1")
    coll.drop_index([("b", 1), ("c", -1)])
    assert set(specs(coll)) == {"_id_", "d_1"}
    coll.create_index("e")
    reply = coll.database.command("dropIndexes", coll.name, index="*")
    assert reply["nIndexesWas"] == 3
    assert set(specs(coll)) == {"_id_"}


def test_drop_indexes_helper(coll):
    coll.create_index("a")
    coll.create_index("b")
    coll.drop_indexes()
    assert list(specs(coll)) == ["_id_"]


def test_id_index_cannot_be_dropped(coll):
    coll.insert_one({})
    with pytest.raises(OperationFailure) as err:
        coll.drop_index("_id_")
    assert err.value.code == 72
    assert err.value.details["codeName"] == "InvalidOptions"
    assert "_id_" in specs(coll)


def test_dropping_an_unknown_index_is_index_not_found(coll):
    coll.insert_one({})
    with pytest.raises(OperationFailure) as err:
        coll.drop_index("nope_1")
    assert err.value.code == 27
    assert err.value.details["codeName"] == "IndexNotFound"


def test_list_indexes_of_a_missing_collection_is_namespace_not_found(db):
    with pytest.raises(OperationFailure) as err:
        db.command("listIndexes", "nothing")
    assert err.value.code == 26


def test_unique_index_over_duplicates_fails_and_leaves_no_index(coll):
    coll.insert_many([{"a": 1}, {"a": 2}, {"a": 1}])
    with pytest.raises(OperationFailure) as err:
        coll.create_index("a", unique=True)
    assert err.value.code == 11000
    assert list(specs(coll)) == ["_id_"]
    coll.insert_one({"a": 2})
    assert coll.count_documents({"a": 2}) == 2


def stages(plan):
    """Every stage document under an explain plan, whatever its nesting."""
    if isinstance(plan, dict):
        if "stage" in plan:
            yield plan
        for v in plan.values():
            yield from stages(v)
    elif isinstance(plan, list):
        for v in plan:
            yield from stages(v)


def uses_index(explain, name):
    plan = explain["queryPlanner"]["winningPlan"]
    return any(s["stage"] == "IXSCAN" and s.get("indexName") == name for s in stages(plan))


@pytest.fixture
def indexed(coll):
    coll.insert_many([{"_id": i, "a": i % 50, "b": i % 7, "pad": "x" * 20} for i in range(2000)])
    coll.create_index("a")
    return coll


@pytest.mark.parametrize("query", [
    {"a": 7}, {"a": {"$gte": 10, "$lt": 12}}, {"a": {"$in": [1, 5, 9]}},
], ids=["equality", "range", "in"])
def test_explain_names_the_index(indexed, query):
    explain = indexed.find(query).explain()
    assert uses_index(explain, "a_1"), explain["queryPlanner"]["winningPlan"]
    assert not any(s["stage"] == "COLLSCAN" for s in stages(explain["queryPlanner"]["winningPlan"]))


@pytest.mark.parametrize(("query", "bounds"), [
    ({"a": 7}, ["[7, 7]"]),
    ({"a": {"$gte": 10, "$lt": 12}}, ["[10, 12)"]),
    ({"a": {"$in": [9, 1, 5]}}, ["[1, 1]", "[5, 5]", "[9, 9]"]),
], ids=["equality", "range", "in"])
def test_explain_shows_index_bounds(indexed, query, bounds):
    plan = indexed.find(query).explain()["queryPlanner"]["winningPlan"]
    [scan] = [s for s in stages(plan) if s["stage"] == "IXSCAN"]
    assert scan["indexBounds"] == {"a": bounds}
    assert scan["direction"] == "forward" and scan["keyPattern"] == {"a": 1}


def test_explain_execution_stats(indexed):
    stats = indexed.find({"a": 7}).explain()["executionStats"]
    assert stats["nReturned"] == 40
    assert stats["totalDocsExamined"] == 40


def test_explain_of_a_sort_uses_the_index_order(indexed):
    explain = indexed.find({"a": {"$gt": 40}}).sort("a", -1).explain()
    plan = explain["queryPlanner"]["winningPlan"]
    assert uses_index(explain, "a_1"), plan
    assert not any(s["stage"] == "SORT" for s in stages(plan))
    got = [d["a"] for d in indexed.find({"a": {"$gt": 40}}).sort("a", -1)]
    assert got == sorted(got, reverse=True) and len(got) == 9 * 40


def test_explain_of_an_or_scans_each_clause_index(indexed):
    indexed.create_index("b")
    query = {"$or": [{"a": 3}, {"b": 4}]}
    plan = indexed.find(query).explain()["queryPlanner"]["winningPlan"]
    scanned = {s.get("indexName") for s in stages(plan) if s["stage"] == "IXSCAN"}
    assert scanned == {"a_1", "b_1"}, plan
    assert not any(s["stage"] == "COLLSCAN" for s in stages(plan))


def test_explain_without_an_index_is_a_collection_scan(indexed):
    plan = indexed.find({"b": 3}).explain()["queryPlanner"]["winningPlan"]
    assert any(s["stage"] == "COLLSCAN" for s in stages(plan))
    assert indexed.find({"b": 3}).explain()["queryPlanner"]["namespace"] == (
        f"{indexed.database.name}.{indexed.name}")


def random_value(rng):
    kind = rng.random()
    if kind < 0.5:
        return rng.randint(0, 20)
    if kind < 0.6:
        return rng.randint(0, 20) + 0.5
    if kind < 0.7:
        return rng.choice(["a", "m", "z", "mm"])
    if kind < 0.78:
        return None
    if kind < 0.9:
        return [rng.randint(0, 20) for _ in range(rng.randint(0, 3))]
    return {"k": rng.randint(0, 3)}


def random_doc(rng, i):
    doc = {"_id": i, "b": rng.randint(0, 10)}
    if rng.random() < 0.9:
        doc["a"] = random_value(rng)
    if rng.random() < 0.8:
        doc["t"] = rng.sample(["p", "q", "r", "s"], rng.randint(0, 3))
    return doc


def random_query(rng):
    n = rng.randint(0, 20)
    choices = [
        {"a": n}, {"a": n + 0.5}, {"a": None}, {"a": {"$gt": n}}, {"a": {"$gte": n, "$lt": n + 4}},
        {"a": {"$lte": n}}, {"a": {"$in": [n, n + 1, "m", None]}}, {"a": {"$ne": n}},
        {"a": {"$nin": [n, None]}}, {"a": {"$exists": False}}, {"a": {"$exists": True}},
        {"a": {"$lt": "n"}}, {"a": {"$gt": "a"}}, {"a": {"k": n % 4}}, {"a": []},
        {"a": n, "b": {"$gt": n % 10}}, {"a": {"$gt": n}, "b": n % 11},
        {"b": {"$lte": n % 11}}, {"t": rng.choice("pqrs")}, {"t": {"$all": ["p", "q"]}},
        {"t": {"$size": 0}}, {"$or": [{"a": n}, {"b": n % 11}]}, {"a.k": n % 4},
        {"a": {"$elemMatch": {"$gt": n}}}, {"a": {"$type": "string"}},
    ]
    return rng.choice(choices)


def test_random_queries_agree_with_a_collection_scan(coll):
    rng = random.Random(20240601)
    coll.insert_many([random_doc(rng, i) for i in range(400)])
    names = [coll.create_index("a"), coll.create_index([("a", 1), ("b", -1)]),
             coll.create_index("b"), coll.create_index("t"), coll.create_index("a.k")]
    mismatches = []
    for _ in range(300):
        query = random_query(rng)
        sort = [("a", rng.choice([1, -1])), ("_id", 1)] if rng.random() < 0.5 else [("_id", 1)]
        natural = [d["_id"] for d in coll.find(query).sort(sort).hint([("$natural", 1)])]
        for hint in [None] + names:
            cursor = coll.find(query).sort(sort)
            if hint:
                cursor = cursor.hint(hint)
            got = [d["_id"] for d in cursor]
            if got != natural:
                mismatches.append((query, sort, hint, len(got), len(natural)))
        assert coll.count_documents(query) == len(natural)
    assert mismatches == []
