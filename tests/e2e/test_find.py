"""The `find`, `getMore` and `killCursors` commands through pymongo against the real binary:
query operators (comparison, logical, element, $regex, $mod, $expr, $all, $elemMatch, $size,
dotted paths into arrays), projections (inclusion, exclusion, $slice, $elemMatch,
positional `$`), sort over mixed types (MongoDB's BSON comparison order, missing as null,
arrays by their smallest element ascending and largest descending), skip and limit,
cursors spread over many getMores, single-batch finds, killCursors, and hints (by name, by
key pattern, and an unknown one: 2 BadValue).

The last test checks ShaleDB's own guarantee that a cursor reads from the snapshot its find
opened (MongoDB allows either outcome for documents inserted while a cursor is open)."""

import datetime
import re

import pytest
from bson import Int64, MaxKey, MinKey, ObjectId, Regex, Timestamp
from pymongo import ASCENDING, DESCENDING, monitoring
from pymongo.errors import OperationFailure

PEOPLE = [
    {"_id": 1, "name": "ann", "age": 30, "tags": ["a", "b"], "scores": [80, 95],
     "addr": {"city": "Oslo", "zip": "0150"},
     "items": [{"sku": "x", "qty": 5}, {"sku": "y", "qty": 1}]},
    {"_id": 2, "name": "bob", "age": 25, "tags": ["b"], "scores": [60],
     "addr": {"city": "Bergen"}, "items": [{"sku": "x", "qty": 1}]},
    {"_id": 3, "name": "Cid", "age": 35.5, "tags": [], "scores": [], "items": []},
    {"_id": 4, "name": "dee", "age": None, "tags": ["a", "b", "c"], "scores": [100, 70, 85],
     "addr": {"city": "oslo"}},
    {"_id": 5, "name": "eve", "tags": "a"},
    {"_id": 6, "name": "fay", "age": "40",
     "items": [{"sku": "y", "qty": 7}, {"sku": "x", "qty": 2}]},
]


@pytest.fixture
def people(coll):
    coll.insert_many(PEOPLE)
    return coll


def ids(cursor):
    return sorted(d["_id"] for d in cursor)


FILTERS = [
    ({"age": 30}, [1]),
    ({"age": {"$eq": 25}}, [2]),
    ({"age": {"$gt": 26}}, [1, 3]),
    ({"age": {"$gte": 25, "$lt": 35}}, [1, 2]),
    ({"age": {"$lte": 30}}, [1, 2]),
    ({"age": {"$gt": "3"}}, [6]),
    ({"age": {"$ne": 30}}, [2, 3, 4, 5, 6]),
    ({"age": {"$in": [25, "40"]}}, [2, 6]),
    ({"age": {"$nin": [25, 30]}}, [3, 4, 5, 6]),
    ({"age": None}, [4, 5]),
    ({"age": {"$exists": False}}, [5]),
    ({"age": {"$exists": True}}, [1, 2, 3, 4, 6]),
    ({"age": {"$type": "string"}}, [6]),
    ({"age": {"$type": "number"}}, [1, 2, 3]),
    ({"age": {"$type": "null"}}, [4]),
    ({"age": {"$type": ["double", "string"]}}, [3, 6]),
    ({"$or": [{"age": 25}, {"name": "eve"}]}, [2, 5]),
    ({"$and": [{"tags": "a"}, {"tags": "b"}]}, [1, 4]),
    ({"$nor": [{"tags": "a"}, {"age": {"$lt": 30}}]}, [3, 6]),
    ({"age": {"$not": {"$gt": 26}}}, [2, 4, 5, 6]),
    ({"name": {"$regex": "^[a-c]"}}, [1, 2]),
    ({"name": {"$regex": "^c", "$options": "i"}}, [3]),
    ({"name": re.compile("e$")}, [4, 5]),
    ({"name": {"$in": [re.compile("^a"), "fay"]}}, [1, 6]),
    ({"addr.city": {"$regex": "^oslo$", "$options": "i"}}, [1, 4]),
    ({"age": {"$mod": [10, 0]}}, [1]),
    ({"$expr": {"$eq": ["$name", "bob"]}}, [2]),
    ({"$expr": {"$gt": [{"$size": {"$ifNull": ["$scores", []]}}, 1]}}, [1, 4]),
    ({"tags": {"$all": ["a", "b"]}}, [1, 4]),
    ({"tags": {"$all": ["a"]}}, [1, 4, 5]),
    ({"scores": {"$elemMatch": {"$gte": 80, "$lt": 90}}}, [1, 4]),
    ({"items": {"$elemMatch": {"sku": "y", "qty": {"$gte": 5}}}}, [6]),
    ({"items.sku": "y", "items.qty": {"$gte": 5}}, [1, 6]),
    ({"tags": {"$size": 2}}, [1]),
    ({"tags": {"$size": 0}}, [3]),
    ({"items.qty": 1}, [1, 2]),
    ({"items.0.sku": "y"}, [6]),
    ({"scores.1": {"$gt": 90}}, [1]),
    ({"scores": {"$gt": 90}}, [1, 4]),
    ({"scores": {"$gt": 60, "$lt": 75}}, [4]),
    ({"tags": ["a", "b"]}, [1]),
    ({"tags": "c"}, [4]),
    ({"addr": {"city": "Bergen"}}, [2]),
    ({"addr.zip": {"$exists": True}}, [1]),
    ({}, [1, 2, 3, 4, 5, 6]),
]


@pytest.mark.parametrize(("query", "expected"), FILTERS, ids=[str(f[0]) for f in FILTERS])
def test_filter(people, query, expected):
    assert ids(people.find(query)) == expected


def test_bad_operator_is_bad_value(people):
    with pytest.raises(OperationFailure) as err:
        people.find_one({"age": {"$bogus": 1}})
    assert err.value.code == 2
    assert err.value.details["codeName"] == "BadValue"


def test_find_on_a_missing_collection_is_empty(db):
    reply = db.command("find", "nothing_here")
    assert reply["cursor"]["firstBatch"] == [] and reply["cursor"]["id"] == 0
    assert reply["cursor"]["ns"] == f"{db.name}.nothing_here"


PROJECTIONS = [
    (4, {"name": 1}, {"_id": 4, "name": "dee"}),
    (4, {"name": 1, "_id": 0}, {"name": "dee"}),
    (2, {"tags": 0, "scores": 0, "items": 0, "addr": 0, "age": 0}, {"_id": 2, "name": "bob"}),
    (1, {"addr.city": 1}, {"_id": 1, "addr": {"city": "Oslo"}}),
    (5, {"addr.city": 1}, {"_id": 5}),
    (1, {"items.sku": 1, "_id": 0}, {"items": [{"sku": "x"}, {"sku": "y"}]}),
    (4, {"scores": {"$slice": 2}, "_id": 0, "name": 1}, {"name": "dee", "scores": [100, 70]}),
    (4, {"scores": {"$slice": -1}, "tags": 0, "addr": 0},
     {"_id": 4, "name": "dee", "age": None, "scores": [85]}),
    (4, {"scores": {"$slice": [1, 1]}, "name": 1}, {"_id": 4, "name": "dee", "scores": [70]}),
    (6, {"items": {"$elemMatch": {"sku": "x"}}}, {"_id": 6, "items": [{"sku": "x", "qty": 2}]}),
    (2, {"items": {"$elemMatch": {"sku": "y"}}}, {"_id": 2}),
]


@pytest.mark.parametrize(("_id", "projection", "expected"), PROJECTIONS)
def test_projection(people, _id, projection, expected):
    assert people.find_one({"_id": _id}, projection) == expected


def test_slice_alone_keeps_every_other_field(people):
    doc = people.find_one({"_id": 4}, {"scores": {"$slice": 1}})
    assert doc == {**PEOPLE[3], "scores": [100]}


def test_positional_projection(people):
    got = list(people.find({"scores": {"$gte": 90}}, {"scores.$": 1}).sort("_id", 1))
    assert got == [{"_id": 1, "scores": [95]}, {"_id": 4, "scores": [100]}]


def test_mixing_inclusion_and_exclusion_is_refused(people):
    with pytest.raises(OperationFailure) as err:
        people.find_one({}, {"name": 1, "age": 0})
    assert err.value.code == 31254


def sorted_ids(coll, spec):
    return [d["_id"] for d in coll.find({}, {"_id": 1}).sort(spec)]


def test_sort_follows_the_bson_type_order(coll):
    values = {
        "maxkey": MaxKey(), "minkey": MinKey(), "null": None, "int": 5, "double": 2.5,
        "long": Int64(10), "str_lower": "abc", "str_upper": "B", "object": {"a": 1},
        "array": [[1]], "empty_array": [], "bin": b"\x01", "oid": ObjectId(),
        "false": False, "true": True, "date": datetime.datetime(2020, 1, 1),
        "ts": Timestamp(1, 1), "regex": Regex("a"),
    }
    coll.insert_many([{"_id": k, "v": v} for k, v in values.items()] + [{"_id": "missing"}])
    expected = [
        "minkey", "empty_array", "missing", "null", "double", "int", "long", "str_upper",
        "str_lower", "object", "array", "bin", "oid", "false", "true", "date", "ts", "regex",
        "maxkey",
    ]
    assert sorted_ids(coll, [("v", ASCENDING), ("_id", ASCENDING)]) == expected
    # Descending: the same order reversed except that the null/missing tie still sorts by
    # _id ascending (and an empty array is below null either way).
    desc = sorted_ids(coll, [("v", DESCENDING), ("_id", ASCENDING)])
    assert desc == list(reversed(expected[4:])) + ["missing", "null", "empty_array", "minkey"]


def test_arrays_sort_by_smallest_ascending_and_largest_descending(coll):
    coll.insert_many([{"_id": 1, "v": [1, 10]}, {"_id": 2, "v": [5]}, {"_id": 3, "v": [0, 7]},
                      {"_id": 4, "v": 6}])
    assert sorted_ids(coll, [("v", ASCENDING)]) == [3, 1, 2, 4]
    assert sorted_ids(coll, [("v", DESCENDING)]) == [1, 3, 4, 2]


def test_compound_and_dotted_sort(people):
    assert sorted_ids(people, [("addr.city", ASCENDING), ("_id", DESCENDING)]) == [
        6, 5, 3, 2, 1, 4]
    assert sorted_ids(people, [("name", DESCENDING)]) == [6, 5, 4, 2, 1, 3]


def test_skip_and_limit(coll):
    coll.insert_many([{"_id": i} for i in range(20)])
    assert [d["_id"] for d in coll.find().sort("_id", 1).skip(5).limit(3)] == [5, 6, 7]
    assert [d["_id"] for d in coll.find().sort("_id", -1).skip(18)] == [1, 0]
    assert list(coll.find().skip(25)) == []
    assert len(list(coll.find().limit(0))) == 20
    assert [d["_id"] for d in coll.find({"_id": {"$gte": 10}}).sort("_id", 1).limit(2)] == [
        10, 11]


class Listener(monitoring.CommandListener):
    def __init__(self):
        self.replies = []

    def started(self, event):
        pass

    def succeeded(self, event):
        if event.command_name in ("find", "getMore"):
            self.replies.append((event.command_name, event.reply))

    def failed(self, event):
        pass


def test_cursor_spanning_many_get_mores(shared_server, coll):
    coll.insert_many([{"i": i} for i in range(1000)])
    listener = Listener()
    client = shared_server.client(event_listeners=[listener])
    try:
        watched = client[coll.database.name][coll.name]
        seen = [d["i"] for d in watched.find().sort("i", 1).batch_size(7)]
    finally:
        client.close()
    assert seen == list(range(1000))
    names = [name for name, _ in listener.replies]
    assert names == ["find"] + ["getMore"] * 142
    sizes = [len(r["cursor"].get("firstBatch", r["cursor"].get("nextBatch"))) for _, r in
             listener.replies]
    assert sizes == [7] * 142 + [6]
    assert listener.replies[-1][1]["cursor"]["id"] == 0


def test_default_first_batch_is_101_documents(db):
    db.c.insert_many([{"_id": i} for i in range(150)])
    reply = db.command("find", "c")
    assert len(reply["cursor"]["firstBatch"]) == 101 and reply["cursor"]["id"] != 0
    more = db.command("getMore", Int64(reply["cursor"]["id"]), collection="c")
    assert [d["_id"] for d in more["cursor"]["nextBatch"]] == list(range(101, 150))
    assert more["cursor"]["id"] == 0 and more["cursor"]["ns"] == f"{db.name}.c"


def test_single_batch_closes_the_cursor(db):
    db.c.insert_many([{"_id": i} for i in range(20)])
    reply = db.command("find", "c", batchSize=5, singleBatch=True)
    assert len(reply["cursor"]["firstBatch"]) == 5
    assert reply["cursor"]["id"] == 0
    assert [d["_id"] for d in db.c.find().sort("_id", 1).limit(-3)] == [0, 1, 2]


def test_kill_cursors(db):
    db.c.insert_many([{"_id": i} for i in range(10)])
    cursor_id = db.command("find", "c", batchSize=2)["cursor"]["id"]
    assert cursor_id != 0
    reply = db.command("killCursors", "c", cursors=[Int64(cursor_id), Int64(12345)])
    assert reply["cursorsKilled"] == [cursor_id]
    assert reply["cursorsNotFound"] == [12345]
    with pytest.raises(OperationFailure) as err:
        db.command("getMore", Int64(cursor_id), collection="c")
    assert err.value.code == 43
    assert err.value.details["codeName"] == "CursorNotFound"


def test_get_more_on_an_exhausted_cursor_is_cursor_not_found(db):
    db.c.insert_many([{"_id": i} for i in range(3)])
    cursor_id = db.command("find", "c", batchSize=2)["cursor"]["id"]
    last = db.command("getMore", Int64(cursor_id), collection="c")
    assert last["cursor"]["id"] == 0
    with pytest.raises(OperationFailure) as err:
        db.command("getMore", Int64(cursor_id), collection="c")
    assert err.value.code == 43


def test_limit_across_batches(coll):
    coll.insert_many([{"_id": i} for i in range(50)])
    got = [d["_id"] for d in coll.find().sort("_id", -1).limit(10).batch_size(3)]
    assert got == list(range(49, 39, -1))


def test_batches_stop_before_16_mib(db):
    big = "x" * (5 * 1024 * 1024)
    db.c.insert_many([{"_id": i, "big": big} for i in range(5)])
    reply = db.command("find", "c", sort={"_id": 1})
    first = [d["_id"] for d in reply["cursor"]["firstBatch"]]
    assert 1 <= len(first) <= 3 and reply["cursor"]["id"] != 0
    assert [d["_id"] for d in db.c.find().sort("_id", 1)] == [0, 1, 2, 3, 4]


def test_get_more_on_another_collection_is_unauthorized(db):
    db.c.insert_many([{"_id": i} for i in range(5)])
    cursor_id = db.command("find", "c", batchSize=1)["cursor"]["id"]
    with pytest.raises(OperationFailure) as err:
        db.command("getMore", Int64(cursor_id), collection="other")
    assert err.value.code == 13


def test_hints(coll):
    coll.insert_many([{"_id": i, "a": i % 5, "b": i} for i in range(50)])
    coll.create_index("a")
    expected = [i for i in range(50) if i % 5 == 3]
    assert ids(coll.find({"a": 3}).hint("a_1")) == expected
    assert ids(coll.find({"a": 3}).hint([("a", 1)])) == expected
    assert ids(coll.find({"a": 3}).hint("_id_")) == expected
    assert ids(coll.find({"a": 3}).hint([("$natural", 1)])) == expected


@pytest.mark.parametrize("hint", ["no_such_index", [("b", 1)]], ids=["name", "key-pattern"])
def test_unknown_hint_is_bad_value(coll, hint):
    coll.insert_one({"a": 1, "b": 1})
    coll.create_index("a")
    with pytest.raises(OperationFailure) as err:
        list(coll.find({"a": 1}).hint(hint))
    assert err.value.code == 2
    assert err.value.details["codeName"] == "BadValue"


def test_cursor_reads_the_snapshot_of_its_find(db):
    db.c.insert_many([{"_id": i} for i in range(100)])
    first = db.command("find", "c", sort={"_id": 1}, batchSize=10)
    seen = [d["_id"] for d in first["cursor"]["firstBatch"]]
    db.c.insert_many([{"_id": i} for i in range(100, 200)])
    db.c.delete_many({"_id": {"$gte": 90, "$lt": 100}})
    cursor_id = first["cursor"]["id"]
    while cursor_id:
        reply = db.command("getMore", Int64(cursor_id), collection="c", batchSize=10)
        seen += [d["_id"] for d in reply["cursor"]["nextBatch"]]
        cursor_id = reply["cursor"]["id"]
    assert seen == list(range(100))
    assert db.c.count_documents({}) == 190
