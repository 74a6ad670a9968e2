"""The `delete` command through pymongo's delete_one and delete_many against the real binary:
the deleted counts, filters over indexed and unindexed fields, batches of delete statements
(ordered, with `limit` 0 and 1), deletes on a collection that does not exist (0 deleted, no
error, no collection created), and that deleted documents leave their indexes too (a unique
key can be taken again)."""

import pytest
from pymongo import DeleteMany, DeleteOne
from pymongo.errors import OperationFailure


@pytest.fixture
def filled(coll):
    coll.insert_many([{"_id": i, "v": i % 4, "tag": "even" if i % 2 == 0 else "odd"}
                      for i in range(40)])
    return coll


def test_delete_one_removes_one_matching_document(filled):
    result = filled.delete_one({"v": 1})
    assert result.acknowledged and result.deleted_count == 1
    assert result.raw_result["n"] == 1 and result.raw_result["ok"] == 1.0
    assert filled.count_documents({"v": 1}) == 9
    assert filled.count_documents({}) == 39


def test_delete_many_removes_every_match(filled):
    assert filled.delete_many({"tag": "odd"}).deleted_count == 20
    assert filled.count_documents({}) == 20
    assert filled.count_documents({"tag": "odd"}) == 0
    assert sorted(d["_id"] for d in filled.find()) == list(range(0, 40, 2))


def test_delete_with_operators(filled):
    assert filled.delete_many({"_id": {"$gte": 30}, "v": {"$in": [0, 3]}}).deleted_count == 5
    assert filled.delete_many({"$or": [{"_id": 0}, {"_id": 1}]}).deleted_count == 2
    assert filled.count_documents({}) == 33


def test_delete_without_match_deletes_nothing(filled):
    assert filled.delete_one({"v": 99}).deleted_count == 0
    assert filled.delete_many({"missing": {"$exists": True}}).deleted_count == 0
    assert filled.count_documents({}) == 40


def test_delete_many_with_empty_filter_empties_the_collection(filled):
    assert filled.delete_many({}).deleted_count == 40
    assert filled.count_documents({}) == 0
    assert filled.find_one() is None
    assert filled.name in filled.database.list_collection_names()


def test_delete_on_a_missing_collection(db):
    assert db.nowhere.delete_one({"a": 1}).deleted_count == 0
    assert db.nowhere.delete_many({}).deleted_count == 0
    assert "nowhere" not in db.list_collection_names()


def test_delete_batch_with_limits(db):
    db.c.insert_many([{"_id": i, "v": i % 3} for i in range(9)])
    reply = db.command("delete", "c", deletes=[
        {"q": {"v": 0}, "limit": 1},
        {"q": {"v": 1}, "limit": 0},
        {"q": {"v": 5}, "limit": 0},
    ])
    assert reply["n"] == 4 and "writeErrors" not in reply
    assert db.c.count_documents({}) == 5
    assert db.c.count_documents({"v": 0}) == 2


def test_bulk_write_deletes(coll):
    coll.insert_many([{"_id": i} for i in range(10)])
    result = coll.bulk_write([DeleteOne({"_id": 0}), DeleteMany({"_id": {"$gt": 5}}),
                              DeleteOne({"_id": 0})])
    assert result.deleted_count == 5
    assert sorted(d["_id"] for d in coll.find()) == [1, 2, 3, 4, 5]


def test_deleted_documents_leave_their_indexes(coll):
    coll.create_index("email", unique=True)
    coll.insert_many([{"_id": 1, "email": "a"}, {"_id": 2, "email": "b"}])
    coll.delete_one({"email": "a"})
    assert coll.find_one({"email": "a"}) is None
    assert list(coll.find({"email": {"$gte": ""}}).hint("email_1")) == [{"_id": 2, "email": "b"}]
    coll.insert_one({"_id": 3, "email": "a"})
    coll.insert_one({"_id": 1, "email": "c"})
    assert coll.count_documents({}) == 3


def test_delete_by_id_in_a_large_collection(coll):
    coll.insert_many([{"_id": i, "pad": "p" * 50} for i in range(5000)])
    assert coll.delete_many({"_id": {"$mod": [7, 0]}}).deleted_count == 715
    assert coll.count_documents({}) == 5000 - 715
    assert coll.estimated_document_count() == 5000 - 715
    assert coll.find_one({"_id": 700}) is None and coll.find_one({"_id": 701}) is not None


def test_bad_filter_is_refused_with_bad_value(coll):
    coll.insert_one({"a": 1})
    with pytest.raises(OperationFailure) as err:
        coll.delete_many({"a": {"$bogus": 1}})
    assert err.value.code == 2
    assert coll.count_documents({}) == 1
