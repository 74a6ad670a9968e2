"""The `findAndModify` command through pymongo's find_one_and_update, find_one_and_replace
and find_one_and_delete against the real binary: which document a sort picks, projections of
the returned document, the document before or after the change (`new`), upserts (nothing
returned before, the new document after; `lastErrorObject.upserted`), no match (null value),
the raw reply's `lastErrorObject` ({n, updatedExisting, upserted}), and the errors MongoDB
gives: 66 for a changed `_id`, 11000 for a duplicate key, 9 for an unknown modifier."""

import pytest
from bson import ObjectId
from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError, OperationFailure

BEFORE = ReturnDocument.BEFORE
AFTER = ReturnDocument.AFTER


@pytest.fixture
def queue(coll):
    coll.insert_many([
        {"_id": 1, "g": "a", "pri": 3, "state": "new"},
        {"_id": 2, "g": "a", "pri": 1, "state": "new"},
        {"_id": 3, "g": "a", "pri": 2, "state": "new"},
        {"_id": 4, "g": "b", "pri": 0, "state": "new"},
    ])
    return coll


def test_update_returns_the_document_before_by_default(queue):
    doc = queue.find_one_and_update({"g": "a"}, {"$set": {"state": "taken"}},
                                    sort=[("pri", 1)])
    assert doc == {"_id": 2, "g": "a", "pri": 1, "state": "new"}
    assert queue.find_one({"_id": 2})["state"] == "taken"
    assert queue.count_documents({"state": "taken"}) == 1


def test_update_returns_the_document_after(queue):
    doc = queue.find_one_and_update({"g": "a"}, {"$inc": {"pri": 10}}, sort=[("pri", -1)],
                                    return_document=AFTER)
    assert doc == {"_id": 1, "g": "a", "pri": 13, "state": "new"}


def test_sort_picks_in_order_until_nothing_is_left(queue):
    taken = []
    while True:
        doc = queue.find_one_and_update({"g": "a", "state": "new"},
                                        {"$set": {"state": "taken"}}, sort=[("pri", 1)])
        if doc is None:
            break
        taken.append(doc["_id"])
    assert taken == [2, 3, 1]


def test_projection_of_the_returned_document(queue):
    doc = queue.find_one_and_update({"_id": 3}, {"$set": {"state": "x"}},
                                    projection={"state": 1, "_id": 0}, return_document=AFTER)
    assert doc == {"state": "x"}
    doc = queue.find_one_and_delete({"_id": 4}, projection={"g": 0, "state": 0})
    assert doc == {"_id": 4, "pri": 0}


def test_no_match_returns_none(queue):
    assert queue.find_one_and_update({"g": "zzz"}, {"$set": {"x": 1}}) is None
    assert queue.find_one_and_replace({"g": "zzz"}, {"x": 1}, return_document=AFTER) is None
    assert queue.find_one_and_delete({"g": "zzz"}) is None
    assert queue.count_documents({"x": 1}) == 0


def test_upsert_before_returns_none_and_after_returns_the_new_document(coll):
    assert coll.find_one_and_update({"k": 1}, {"$set": {"v": 1}}, upsert=True) is None
    assert coll.count_documents({"k": 1, "v": 1}) == 1
    doc = coll.find_one_and_update({"k": 2}, {"$set": {"v": 2}}, upsert=True,
                                   return_document=AFTER)
    assert isinstance(doc["_id"], ObjectId)
    assert {k: v for k, v in doc.items() if k != "_id"} == {"k": 2, "v": 2}


def test_raw_reply_of_an_update(queue):
    reply = queue.database.command("findAndModify", queue.name, query={"_id": 1},
                                   update={"$set": {"state": "done"}}, new=True)
    assert reply["ok"] == 1.0
    assert reply["lastErrorObject"] == {"n": 1, "updatedExisting": True}
    assert reply["value"] == {"_id": 1, "g": "a", "pri": 3, "state": "done"}


def test_raw_reply_of_an_upsert(coll):
    reply = coll.database.command("findAndModify", coll.name, query={"_id": "u"},
                                  update={"$set": {"a": 1}}, upsert=True)
    assert reply["lastErrorObject"] == {"n": 1, "updatedExisting": False, "upserted": "u"}
    assert reply["value"] is None


def test_raw_reply_of_a_remove_and_of_no_match(queue):
    reply = queue.database.command("findAndModify", queue.name, query={"_id": 4}, remove=True)
    assert reply["lastErrorObject"] == {"n": 1}
    assert reply["value"] == {"_id": 4, "g": "b", "pri": 0, "state": "new"}
    reply = queue.database.command("findAndModify", queue.name, query={"_id": 4}, remove=True)
    assert reply["lastErrorObject"] == {"n": 0}
    assert reply["value"] is None
    reply = queue.database.command("findAndModify", queue.name, query={"_id": 4},
                                   update={"$set": {"a": 1}})
    assert reply["lastErrorObject"] == {"n": 0, "updatedExisting": False}


def test_replace(queue):
    doc = queue.find_one_and_replace({"g": "a"}, {"g": "a", "replaced": True},
                                     sort=[("pri", -1)])
    assert doc["_id"] == 1 and doc["pri"] == 3
    assert queue.find_one({"_id": 1}) == {"_id": 1, "g": "a", "replaced": True}
    doc = queue.find_one_and_replace({"_id": 2}, {"only": 1}, return_document=AFTER)
    assert doc == {"_id": 2, "only": 1}


def test_replace_upsert(coll):
    doc = coll.find_one_and_replace({"_id": 9}, {"v": 1}, upsert=True, return_document=AFTER)
    assert doc == {"_id": 9, "v": 1}


def test_delete_with_sort(queue):
    doc = queue.find_one_and_delete({"g": "a"}, sort=[("pri", -1)])
    assert doc == {"_id": 1, "g": "a", "pri": 3, "state": "new"}
    doc = queue.find_one_and_delete({}, sort=[("pri", 1)])
    assert doc["_id"] == 4
    assert sorted(d["_id"] for d in queue.find()) == [2, 3]


def test_array_filters(coll):
    coll.insert_one({"_id": 1, "a": [1, 5, 9]})
    doc = coll.find_one_and_update({"_id": 1}, {"$set": {"a.$[x]": 0}},
                                   array_filters=[{"x": {"$gt": 4}}], return_document=AFTER)
    assert doc == {"_id": 1, "a": [1, 0, 0]}


def test_changing_id_is_immutable_field(queue):
    with pytest.raises(OperationFailure) as err:
        queue.find_one_and_update({"_id": 1}, {"$set": {"_id": 100}})
    assert err.value.code == 66
    assert err.value.details["codeName"] == "ImmutableField"
    assert queue.find_one({"_id": 1}) is not None


def duplicate_key_error(coll):
    coll.create_index("u", unique=True)
    coll.insert_many([{"_id": 1, "u": 1}, {"_id": 2, "u": 2}])
    with pytest.raises(DuplicateKeyError) as err:
        coll.find_one_and_update({"_id": 2}, {"$set": {"u": 1}})
    return err.value


def test_duplicate_key(coll):
    error = duplicate_key_error(coll)
    assert error.code == 11000 and error.details["codeName"] == "DuplicateKey"
    assert "E11000 duplicate key error" in error.details["errmsg"]
    assert coll.find_one({"_id": 2}) == {"_id": 2, "u": 2}


def test_duplicate_key_names_the_key(coll):
    error = duplicate_key_error(coll)
    assert error.details["keyPattern"] == {"u": 1}
    assert error.details["keyValue"] == {"u": 1}


def test_unknown_modifier_is_failed_to_parse(queue):
    with pytest.raises(OperationFailure) as err:
        queue.find_one_and_update({"_id": 1}, {"$nope": {"a": 1}})
    assert err.value.code == 9


def test_update_and_remove_together_are_refused(queue):
    with pytest.raises(OperationFailure):
        queue.database.command("findAndModify", queue.name, query={}, remove=True,
                               update={"$set": {"a": 1}})
    assert queue.count_documents({}) == 4


def test_on_a_missing_collection(db):
    assert db.nothing.find_one_and_delete({}) is None
    assert "nothing" not in db.list_collection_names()
    assert db.nothing.find_one_and_update({}, {"$set": {"a": 1}}) is None
    assert db.nothing.count_documents({}) == 0
