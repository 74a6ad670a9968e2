"""Collation through pymongo against the real binary: find (filter and sort), count,
distinct, update, delete, findAndModify, bulk writes and aggregate with a `collation`; a
collection's default collation (`create`), shown by `listCollections` and inherited by
its indexes; indexes with a collation listed by `listIndexes`; the planner leaving an
index when the query's collation makes its string bounds wrong (explain); and mongod's
codes for bad collation documents.

Expected results follow the MongoDB manual's Collation page examples (the French
`cote/côte/coté/côté` order, case-insensitive `strength: 2` matches, `numericOrdering`)
and the drivers' CRUD unified spec files `*-collation.json`."""

import pytest
from pymongo import ASCENDING, DeleteOne, UpdateOne
from pymongo.collation import Collation
from pymongo.errors import OperationFailure

CI = {"locale": "en_US", "strength": 2}


@pytest.fixture
def names(coll):
    coll.insert_many(
        [
            {"_id": 1, "name": "ping"},
            {"_id": 2, "name": "PING"},
            {"_id": 3, "name": "Pong"},
            {"_id": 4, "name": "péng"},
            {"_id": 5, "n": 5},
        ]
    )
    return coll


def ids(cursor):
    return [d["_id"] for d in cursor]


def test_find_matches_and_sorts_by_the_collation(names):
    assert ids(names.find({"name": "PING"}).sort("_id")) == [2]
    assert ids(names.find({"name": "PING"}, collation=CI).sort("_id")) == [1, 2]
    assert ids(names.find({"name": {"$in": ["pong"]}}, collation=CI)) == [3]
    assert ids(names.find({"name": {"$ne": "ping"}}, collation=CI).sort("_id")) == [3, 4, 5]
    # Strength 1 ignores accents too; a regex never follows the collation.
    s1 = {"locale": "en", "strength": 1}
    assert ids(names.find({"name": "PENG"}, collation=s1)) == [4]
    assert ids(names.find({"name": {"$regex": "^P"}}, collation=CI).sort("_id")) == [2, 3]
    got = ids(names.find({"name": {"$exists": True}}, collation={"locale": "en"}).sort("name", 1))
    # Root order: p-e-n-g < p-i-n-g < P-I-N-G < P-o-n-g (accents before case).
    assert got == [4, 1, 2, 3]


def test_french_canadian_orders_accents_from_the_end(coll):
    coll.insert_many([{"w": w} for w in ["côté", "coté", "côte", "cote"]])
    simple = [d["w"] for d in coll.find({}, {"_id": 0}).sort("w", ASCENDING)]
    assert simple == ["cote", "coté", "côte", "côté"]
    fr = [
        d["w"]
        for d in coll.find({}, {"_id": 0}, collation={"locale": "fr_CA"}).sort("w", ASCENDING)
    ]
    assert fr == ["cote", "côte", "coté", "côté"]


def test_numeric_ordering(coll):
    coll.insert_many([{"v": v} for v in ["10", "9", "100", "1"]])
    got = [d["v"] for d in coll.find({}, collation={"locale": "en", "numericOrdering": True}).sort("v")]
    assert got == ["1", "9", "10", "100"]


def test_count_and_distinct(names):
    assert names.count_documents({"name": "ping"}, collation=CI) == 2
    assert names.count_documents({"name": "ping"}) == 1
    got = names.distinct("name", collation=CI)
    assert len(got) == 3 and {g.lower() for g in got} == {"ping", "pong", "péng"}
    assert len(names.distinct("name")) == 4


def test_writes_follow_the_collation(names):
    r = names.update_many({"name": "ping"}, {"$set": {"hit": True}}, collation=CI)
    assert (r.matched_count, r.modified_count) == (2, 2)
    r = names.delete_one({"name": "PONG"}, collation=Collation("en_US", strength=2))
    assert r.deleted_count == 1
    doc = names.find_one_and_update(
        {"name": "PING"}, {"$set": {"x": 1}}, sort=[("_id", -1)], collation=CI
    )
    assert doc["_id"] == 2
    r = names.bulk_write(
        [UpdateOne({"name": "PÉNG"}, {"$set": {"y": 1}}, collation=CI), DeleteOne({"name": "PING"}, collation=CI)]
    )
    assert (r.modified_count, r.deleted_count) == (1, 1)
    r = names.delete_many({"name": "PING"})
    assert r.deleted_count == 1


def test_aggregate_with_collation(names):
    got = list(
        names.aggregate(
            [
                {"$match": {"name": {"$exists": True}}},
                {"$group": {"_id": "$name", "n": {"$sum": 1}}},
                {"$sort": {"_id": 1}},
            ],
            collation=CI,
        )
    )
    assert [(g["_id"].lower(), g["n"]) for g in got] == [("péng", 1), ("ping", 2), ("pong", 1)]
    got = list(names.aggregate([{"$match": {"name": "PING"}}, {"$count": "n"}], collation=CI))
    assert got == [{"n": 2}]


def test_collection_default_collation(db):
    db.create_collection("ci", collation=Collation("en_US", strength=2))
    ci = db["ci"]
    ci.insert_many([{"_id": 1, "s": "a"}, {"_id": 2, "s": "A"}, {"_id": 3, "s": "b"}])
    assert ids(ci.find({"s": "a"}).sort("_id")) == [1, 2]
    # A command's own collation wins, `simple` included.
    assert ids(ci.find({"s": "a"}, collation={"locale": "simple"})) == [1]
    info = next(db.list_collections(filter={"name": "ci"}))
    spec = info["options"]["collation"]
    assert (spec["locale"], spec["strength"], spec["caseLevel"], spec["version"]) == ("en_US", 2, False, "57.1")
    # Indexes inherit the default; `_id_` shows it too.
    ci.create_index("s")
    indexes = {i["name"]: i for i in ci.list_indexes()}
    assert indexes["s_1"]["collation"]["strength"] == 2
    assert indexes["_id_"]["collation"]["locale"] == "en_US"
    assert ids(ci.find({"s": "A"}).sort("_id")) == [1, 2]


def test_index_collation_is_listed_and_unique_ones_refused(coll):
    coll.insert_one({"s": "x"})
    coll.create_index("s", name="s_ci", collation=CI)
    listed = {i["name"]: i for i in coll.list_indexes()}
    assert listed["s_ci"]["collation"]["strength"] == 2
    with pytest.raises(OperationFailure) as e:
        coll.create_index("t", unique=True, collation=CI)
    assert e.value.code == 67


def test_index_not_used_for_strings_under_another_collation(coll):
    coll.insert_many([{"_id": i, "s": s, "n": i} for i, s in enumerate(["a", "A", "b", "B"])])
    coll.create_index("s")
    coll.create_index("n")
    plain = coll.find({"s": "a"}).explain()["queryPlanner"]["winningPlan"]
    assert "IXSCAN" in str(plain)
    collated = coll.find({"s": "a"}, collation=CI).explain()["queryPlanner"]["winningPlan"]
    assert "IXSCAN" not in str(collated) and "COLLSCAN" in str(collated)
    assert ids(coll.find({"s": "a"}, collation=CI).sort("_id")) == [0, 1]
    # A number is compared the same under every collation: its index still serves.
    numeric = coll.find({"n": 2}, collation=CI).explain()["queryPlanner"]["winningPlan"]
    assert "IXSCAN" in str(numeric)
    # Sorting by an index under a collation is done in memory.
    assert ids(coll.find({}, collation=CI).sort([("s", 1), ("_id", 1)]).hint("s_1")) == [0, 1, 2, 3]


@pytest.mark.parametrize(
    "collation, code",
    [
        ({"locale": "zz_nope"}, 2),
        ({"locale": "en", "strength": 6}, 51024),
        ({"locale": "en", "bogus": 1}, 40415),
        ({"locale": "en", "caseFirst": "sideways"}, 2),
        ({"locale": "en", "caseLevel": "yes"}, 14),
        ({"strength": 2}, 40414),
    ],
)
def test_bad_collations_are_refused(coll, collation, code):
    coll.insert_one({"a": 1})
    with pytest.raises(OperationFailure) as e:
        list(coll.find({}, collation=collation))
    assert e.value.code == code


def test_unknown_locale_message(coll):
    with pytest.raises(OperationFailure) as e:
        list(coll.find({}, collation={"locale": "zz_nope"}))
    assert "Field 'locale' is invalid in: { locale: \"zz_nope\" }" in str(e.value)


def test_string_id_lookup_under_a_collation_is_not_a_point_read(coll):
    coll.insert_many([{"_id": "a"}, {"_id": "B"}])
    assert ids(coll.find({"_id": "A"}, collation=CI)) == ["a"]
    assert ids(coll.find({"_id": "A"})) == []
    plan = coll.find({"_id": "A"}, collation=CI).explain()["queryPlanner"]["winningPlan"]
    assert "IDHACK" not in str(plan)
    r = coll.update_one({"_id": "b"}, {"$set": {"x": 1}}, collation=CI)
    assert r.modified_count == 1
