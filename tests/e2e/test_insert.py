"""The `insert` command through pymongo against the real binary: single and batched inserts,
ordered and unordered batches with a duplicate key in the middle (which documents landed,
and the write error's index, code 11000, keyPattern and keyValue), the `_id` the server
generates (an ObjectId, first in the document), `_id` values MongoDB refuses, the 16 MiB
document limit, the empty batch, and large batches counted exactly.

Expected values are MongoDB 7.0's: a duplicate key is a write error (not a command error)
with `E11000 duplicate key error` in its message; an array `_id` is 53 (InvalidIdField); a
document over 16 MiB is a write error with code 2 ("object to insert too large"); an empty
batch fails the command with 16 (InvalidLength)."""

import datetime

import bson
import pytest
from bson import Decimal128, Int64, ObjectId, Regex, Timestamp
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure, WriteError

MIB = 1024 * 1024


def test_insert_one_returns_the_id_and_the_document_is_found(coll):
    result = coll.insert_one({"_id": 7, "name": "ann", "tags": ["a", "b"]})
    assert result.acknowledged and result.inserted_id == 7
    assert coll.find_one({"_id": 7}) == {"_id": 7, "name": "ann", "tags": ["a", "b"]}


def test_insert_reply_counts_documents(db):
    reply = db.command("insert", "c", documents=[{"a": 1}, {"a": 2}, {"a": 3}])
    assert reply["n"] == 3 and reply["ok"] == 1.0
    assert "writeErrors" not in reply


def test_every_bson_type_round_trips(coll):
    doc = {
        "_id": 1,
        "double": 1.5,
        "string": "héllo",
        "object": {"x": {"y": [1, {"z": None}]}},
        "array": [1, "two", 3.0, [4]],
        "oid": ObjectId("5f0000000000000000000001"),
        "bool": True,
        "date": datetime.datetime(2024, 2, 29, 12, 0, 0, 123000),
        "null": None,
        "regex": Regex("^a.c$", "i"),
        "int": 42,
        "long": Int64(1 << 40),
        "decimal": Decimal128("1.10"),
        "bytes": b"\x00\x01\x02",
    }
    coll.insert_one(doc)
    raw = coll.with_options(codec_options=CodecOptions(document_class=RawBSONDocument))
    stored = raw.find_one({"_id": 1})
    assert list(stored.keys()) == list(doc.keys())
    back = coll.find_one({"_id": 1})
    assert back["long"] == Int64(1 << 40) and isinstance(back["long"], Int64)
    assert back["decimal"] == Decimal128("1.10")
    assert back["regex"] == Regex("^a.c$", "i")
    assert back == doc


def test_server_generates_an_objectid_first_in_the_document(db):
    # pymongo adds _id itself, so send the command raw to see what the server does.
    db.command("insert", "c", documents=[{"a": 1, "b": {"c": 2}}])
    raw = db.get_collection("c", codec_options=CodecOptions(document_class=RawBSONDocument))
    stored = raw.find_one({"a": 1})
    assert list(stored.keys()) == ["_id", "a", "b"]
    assert isinstance(stored["_id"], ObjectId)


def test_a_given_id_is_moved_first(db):
    db.command("insert", "c", documents=[{"a": 1, "_id": "x", "b": 2}])
    raw = db.get_collection("c", codec_options=CodecOptions(document_class=RawBSONDocument))
    assert list(raw.find_one({"_id": "x"}).keys()) == ["_id", "a", "b"]


def test_generated_ids_are_distinct_objectids(db):
    db.command("insert", "c", documents=[{"i": i} for i in range(50)])
    ids = [d["_id"] for d in db.c.find()]
    assert len(set(ids)) == 50
    assert all(isinstance(i, ObjectId) for i in ids)


def test_duplicate_id_on_insert_one(coll):
    coll.insert_one({"_id": 1})
    with pytest.raises(DuplicateKeyError) as err:
        coll.insert_one({"_id": 1, "other": True})
    assert err.value.code == 11000
    assert err.value.details["keyPattern"] == {"_id": 1}
    assert err.value.details["keyValue"] == {"_id": 1}
    assert "E11000 duplicate key error" in err.value.details["errmsg"]
    assert coll.find_one({"_id": 1}) == {"_id": 1}


def test_ids_of_different_numeric_types_are_the_same_key(coll):
    coll.insert_one({"_id": 1})
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"_id": 1.0})
    with pytest.raises(DuplicateKeyError):
        coll.insert_one({"_id": Int64(1)})
    assert coll.count_documents({}) == 1


def test_ordered_batch_stops_at_the_duplicate(coll):
    docs = [{"_id": 1}, {"_id": 2}, {"_id": 1, "dup": True}, {"_id": 3}, {"_id": 4}]
    with pytest.raises(BulkWriteError) as err:
        coll.insert_many(docs, ordered=True)
    details = err.value.details
    assert details["nInserted"] == 2
    [error] = details["writeErrors"]
    assert error["index"] == 2
    assert error["code"] == 11000
    assert error["keyPattern"] == {"_id": 1}
    assert error["keyValue"] == {"_id": 1}
    assert sorted(d["_id"] for d in coll.find()) == [1, 2]
    assert coll.find_one({"_id": 1}) == {"_id": 1}


def test_unordered_batch_goes_past_every_duplicate(coll):
    docs = [{"_id": 1}, {"_id": 2}, {"_id": 1}, {"_id": 3}, {"_id": 2}, {"_id": 4}]
    with pytest.raises(BulkWriteError) as err:
        coll.insert_many(docs, ordered=False)
    details = err.value.details
    assert details["nInserted"] == 4
    assert [(e["index"], e["code"]) for e in details["writeErrors"]] == [(2, 11000), (4, 11000)]
    assert [e["keyValue"] for e in details["writeErrors"]] == [{"_id": 1}, {"_id": 2}]
    assert sorted(d["_id"] for d in coll.find()) == [1, 2, 3, 4]


def test_raw_reply_of_an_unordered_batch(db):
    db.c.insert_one({"_id": "b"})
    reply = db.command(
        "insert", "c", documents=[{"_id": "a"}, {"_id": "b"}, {"_id": "c"}], ordered=False
    )
    assert reply["ok"] == 1.0
    assert reply["n"] == 2
    [error] = reply["writeErrors"]
    assert error["index"] == 1 and error["code"] == 11000
    assert error["keyPattern"] == {"_id": 1} and error["keyValue"] == {"_id": "b"}
    assert "dup key" in error["errmsg"]


def test_duplicate_on_a_unique_secondary_index(coll):
    coll.create_index("email", unique=True)
    coll.insert_one({"_id": 1, "email": "a@x"})
    with pytest.raises(BulkWriteError) as err:
        coll.insert_many([{"_id": 2, "email": "b@x"}, {"_id": 3, "email": "a@x"}])
    [error] = err.value.details["writeErrors"]
    assert error["index"] == 1 and error["code"] == 11000
    assert error["keyPattern"] == {"email": 1}
    assert error["keyValue"] == {"email": "a@x"}
    assert sorted(d["_id"] for d in coll.find()) == [1, 2]


def test_duplicate_inside_one_batch_on_a_new_collection(coll):
    with pytest.raises(BulkWriteError) as err:
        coll.insert_many([{"_id": "k"}, {"_id": "k"}], ordered=False)
    assert err.value.details["nInserted"] == 1
    assert err.value.details["writeErrors"][0]["index"] == 1
    assert coll.count_documents({}) == 1


@pytest.mark.parametrize("bad_id", [[1, 2], [], Regex("^a")], ids=["array", "empty-array", "regex"])
def test_array_or_regex_id_is_invalid_id_field(coll, bad_id):
    with pytest.raises(WriteError) as err:
        coll.insert_one({"_id": bad_id})
    assert err.value.code == 53
    assert coll.count_documents({}) == 0


def test_array_id_in_a_batch_is_a_write_error_at_its_index(coll):
    with pytest.raises(BulkWriteError) as err:
        coll.insert_many([{"_id": 1}, {"_id": [1]}, {"_id": 3}], ordered=False)
    [error] = err.value.details["writeErrors"]
    assert error["index"] == 1 and error["code"] == 53
    assert sorted(d["_id"] for d in coll.find()) == [1, 3]


def test_id_document_with_a_dollar_field_is_refused(coll):
    with pytest.raises(WriteError) as err:
        coll.insert_one({"_id": {"$bad": 1}})
    assert err.value.code == 52
    assert coll.count_documents({}) == 0


def test_dollar_and_dotted_field_names_are_stored(coll):
    # Since MongoDB 5.0 inserts keep top-level and nested "$"-prefixed and dotted names.
    coll.insert_one({"_id": 1, "$price": 5, "a.b": 2, "n": {"$x": 1}})
    assert coll.find_one({"_id": 1}) == {"_id": 1, "$price": 5, "a.b": 2, "n": {"$x": 1}}


def test_top_level_empty_timestamp_is_filled_in(coll):
    coll.insert_one({"_id": 1, "ts": Timestamp(0, 0), "n": {"ts": Timestamp(0, 0)}})
    doc = coll.find_one({"_id": 1})
    assert doc["ts"] != Timestamp(0, 0)
    assert abs(doc["ts"].time - datetime.datetime.now(datetime.timezone.utc).timestamp()) < 60
    assert doc["n"]["ts"] == Timestamp(0, 0)


def test_document_of_exactly_16_mib_is_accepted(db):
    overhead = len(bson.encode({"_id": 1, "x": ""}))
    doc = {"_id": 1, "x": "a" * (16 * MIB - overhead)}
    reply = db.command("insert", "c", documents=[doc])
    assert reply["n"] == 1 and "writeErrors" not in reply
    assert len(db.c.find_one({"_id": 1})["x"]) == 16 * MIB - overhead


def insert_over_16_mib(db):
    # Sent as a raw command: pymongo's insert_one would refuse it before the server sees it.
    doc = {"_id": 1, "x": "a" * (16 * MIB)}
    return db.command("insert", "c", documents=[doc, {"_id": 2}], ordered=False)


def test_document_over_16_mib_is_refused(db):
    reply = insert_over_16_mib(db)
    assert reply["n"] == 1
    [error] = reply["writeErrors"]
    assert error["index"] == 0
    assert [d["_id"] for d in db.c.find()] == [2]


def test_document_over_16_mib_is_bad_value(db):
    [error] = insert_over_16_mib(db)["writeErrors"]
    assert error["code"] == 2
    assert "object to insert too large" in error["errmsg"]


def test_empty_batch_is_invalid_length(db):
    with pytest.raises(OperationFailure) as err:
        db.command("insert", "c", documents=[])
    assert err.value.code == 16
    assert err.value.details["codeName"] == "InvalidLength"


def test_missing_documents_field_is_refused(db):
    with pytest.raises(OperationFailure) as err:
        db.command("insert", "c")
    assert "BSON field 'insert.documents' is missing but a required field" in str(err.value)


def test_missing_documents_field_is_idl_failed_to_parse(db):
    with pytest.raises(OperationFailure) as err:
        db.command("insert", "c")
    assert err.value.code == 40414


def test_insert_creates_the_collection(db):
    assert "fresh" not in db.list_collection_names()
    db.fresh.insert_one({"a": 1})
    assert "fresh" in db.list_collection_names()


def test_large_batch_lands_whole(coll):
    result = coll.insert_many([{"i": i, "pad": "x" * 20} for i in range(20_000)])
    assert len(result.inserted_ids) == 20_000
    assert coll.count_documents({}) == 20_000
    assert coll.estimated_document_count() == 20_000
    assert coll.count_documents({"i": {"$gte": 19_990}}) == 10
    seen = [d["i"] for d in coll.find({}, {"_id": 0, "i": 1}).sort("i", 1)]
    assert seen == list(range(20_000))


def test_batch_of_the_maximum_write_batch_size(db):
    docs = [{"_id": i} for i in range(100_000)]
    reply = db.command("insert", "c", documents=docs)
    assert reply["n"] == 100_000
    assert db.c.count_documents({}) == 100_000


def test_batch_over_the_maximum_write_batch_size_is_invalid_length(db):
    with pytest.raises(OperationFailure) as err:
        db.command("insert", "c", documents=[{"_id": i} for i in range(100_001)])
    assert err.value.code == 16
    assert db.c.count_documents({}) == 0


def test_unordered_batch_with_errors_keeps_going_over_many_documents(coll):
    coll.insert_many([{"_id": i} for i in range(0, 1000, 10)])
    with pytest.raises(BulkWriteError) as err:
        coll.insert_many([{"_id": i} for i in range(1000)], ordered=False)
    assert err.value.details["nInserted"] == 900
    assert [e["index"] for e in err.value.details["writeErrors"]] == list(range(0, 1000, 10))
    assert coll.count_documents({}) == 1000
