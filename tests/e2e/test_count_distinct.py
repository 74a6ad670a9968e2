"""The `count` and `distinct` commands, and pymongo's count_documents (an aggregate of
$match and $group) and estimated_document_count (the `count` command), against the real
binary: exact counts with filters, skip and limit, zero for a missing collection; distinct
values with array elements counted one by one (one level deep), missing fields skipped but
an explicit null kept, numbers equal across types counted once, dotted paths through arrays
of documents, and filters."""

import pytest
from bson import Int64
from pymongo.errors import OperationFailure


@pytest.fixture
def things(coll):
    coll.insert_many([
        {"_id": 1, "kind": "a", "tags": ["x", "y"], "n": 1, "items": [{"sku": "p"}, {"sku": "q"}]},
        {"_id": 2, "kind": "b", "tags": ["y", "z"], "n": 1.0, "items": [{"sku": "p"}]},
        {"_id": 3, "kind": "a", "tags": "w", "n": Int64(1), "items": []},
        {"_id": 4, "kind": "c", "tags": [], "n": 2},
        {"_id": 5, "kind": "a", "n": None},
        {"_id": 6, "tags": [["x", "y"], "x"], "sub": {"k": 1}},
        {"_id": 7, "kind": "b", "sub": {"k": 1}, "n": "1"},
    ])
    return coll


def test_count_documents(things):
    assert things.count_documents({}) == 7
    assert things.count_documents({"kind": "a"}) == 3
    assert things.count_documents({"tags": "x"}) == 2
    assert things.count_documents({"n": 1}) == 3
    assert things.count_documents({"kind": {"$exists": False}}) == 1
    assert things.count_documents({"nothing": 1}) == 0


def test_count_documents_with_skip_and_limit(things):
    assert things.count_documents({}, skip=5) == 2
    assert things.count_documents({}, skip=10) == 0
    assert things.count_documents({}, limit=3) == 3
    assert things.count_documents({"kind": "a"}, skip=1, limit=1) == 1


def test_count_command(things):
    db = things.database
    assert db.command("count", things.name)["n"] == 7
    assert db.command("count", things.name, query={"kind": "b"})["n"] == 2
    assert db.command("count", things.name, query={}, skip=2, limit=3)["n"] == 3
    assert db.command("count", things.name, skip=6)["n"] == 1


def test_counts_of_a_missing_collection(db):
    assert db.nothing.count_documents({}) == 0
    assert db.nothing.estimated_document_count() == 0
    assert db.command("count", "nothing")["n"] == 0


def test_estimated_document_count_follows_writes(coll):
    coll.insert_many([{"i": i} for i in range(300)])
    assert coll.estimated_document_count() == 300
    coll.delete_many({"i": {"$lt": 100}})
    assert coll.estimated_document_count() == 200
    coll.insert_one({"i": -1})
    assert coll.estimated_document_count() == 201 == coll.count_documents({})


def test_distinct_unwinds_arrays_one_level(things):
    values = things.distinct("tags")
    assert len(values) == 5
    assert sorted(v for v in values if isinstance(v, str)) == ["w", "x", "y", "z"]
    assert ["x", "y"] in values


def test_distinct_keeps_null_and_skips_missing(things):
    assert sorted(map(str, things.distinct("kind"))) == ["a", "b", "c"]
    values = things.distinct("n")
    assert None in values and "1" in values
    assert sorted(v for v in values if isinstance(v, (int, float))) == [1, 2]
    assert len(values) == 4


def test_distinct_with_a_filter(things):
    assert sorted(things.distinct("tags", {"kind": "a"})) == ["w", "x", "y"]
    assert things.distinct("kind", {"_id": {"$gt": 100}}) == []


def test_distinct_dotted_path_through_an_array(things):
    assert sorted(things.distinct("items.sku")) == ["p", "q"]
    assert things.distinct("sub.k") == [1]
    assert things.distinct("sub") == [{"k": 1}]


def test_distinct_of_a_missing_collection(db):
    assert db.nothing.distinct("a") == []


def test_distinct_command_reply(things):
    reply = things.database.command("distinct", things.name, key="kind", query={"_id": 1})
    assert reply["values"] == ["a"] and reply["ok"] == 1.0


def test_distinct_needs_a_string_key(things):
    with pytest.raises(OperationFailure) as err:
        things.database.command("distinct", things.name, key=1)
    assert err.value.code == 14


def test_count_with_an_unknown_hint_is_bad_value(things):
    with pytest.raises(OperationFailure) as err:
        things.database.command("count", things.name, hint="no_such_index")
    assert err.value.code == 2


def test_count_documents_with_an_unknown_hint_is_bad_value(things):
    with pytest.raises(OperationFailure) as err:
        things.count_documents({}, hint="no_such_index")
    assert err.value.code == 2


def test_count_with_a_bad_filter_is_bad_value(things):
    with pytest.raises(OperationFailure) as err:
        things.database.command("count", things.name, query={"a": {"$bogus": 1}})
    assert err.value.code == 2
