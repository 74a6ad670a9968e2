"""Queryable Encryption's updates end to end with libmongocrypt (pymongocrypt), on a
one-member `--replSet` server: `$set` of an explicitly encrypted indexed value,
`findOneAndUpdate` found by an encrypted equality filter, a replacement and an upsert each
store the indexed value and keep `__safeContent__` to the tags of the values the document
holds (the replaced value's tag leaves it), so equality queries follow the change, also in
a session transaction (and an aborted one leaves no state documents); a user's own change
to `__safeContent__` is mongod's 6666200."""

import os

import pytest
from bson.binary import STANDARD
from bson.codec_options import CodecOptions
from pymongo import MongoClient, ReturnDocument
from pymongo.encryption import Algorithm, ClientEncryption, QueryType
from pymongo.encryption_options import AutoEncryptionOpts
from pymongo.errors import OperationFailure, WriteError


KEY_VAULT = "keyvault.datakeys"
KMS = {"local": {"key": os.urandom(96)}}


def test_updates_keep_tags_in_step(primary):
    plain = primary.client()
    ce = ClientEncryption(KMS, KEY_VAULT, plain, CodecOptions(uuid_representation=STANDARD))
    encrypted = MongoClient(
        primary.uri,
        serverSelectionTimeoutMS=5000,
        auto_encryption_opts=AutoEncryptionOpts(KMS, KEY_VAULT, bypass_query_analysis=True),
    )
    try:
        fields = {"fields": [{"path": "ssn", "bsonType": "string", "keyId": None,
                              "queries": {"queryType": "equality", "contention": 0}}]}
        _, created = ce.create_encrypted_collection(plain.app, "people", fields, "local")
        key = created["fields"][0]["keyId"]

        def value(v):
            return ce.encrypt(v, Algorithm.INDEXED, key_id=key, contention_factor=0)

        def query(v):
            return ce.encrypt(v, Algorithm.INDEXED, key_id=key,
                              query_type=QueryType.EQUALITY, contention_factor=0)

        coll = encrypted.app.people

        def ids(v):
            return sorted(d["_id"] for d in coll.find({"ssn": query(v)}))

        for i, v in enumerate(["a", "b", "a"]):
            coll.insert_one({"_id": i, "ssn": value(v)})

        coll.update_one({"_id": 0}, {"$set": {"ssn": value("c"), "x": 1}})
        assert ids("a") == [2] and ids("c") == [0]
        assert len(plain.app.people.find_one({"_id": 0})["__safeContent__"]) == 1

        doc = coll.find_one_and_update({"ssn": query("b")}, {"$set": {"ssn": value("a")}},
                                       return_document=ReturnDocument.AFTER)
        assert doc["_id"] == 1 and doc["ssn"] == "a"
        assert ids("a") == [1, 2] and ids("b") == []

        coll.replace_one({"_id": 2}, {"ssn": value("d"), "y": 2})
        assert ids("a") == [1] and ids("d") == [2]
        assert coll.find_one({"_id": 2})["y"] == 2

        coll.update_one({"_id": 7}, {"$set": {"ssn": value("e")}}, upsert=True)
        assert ids("e") == [7]

        # In a session transaction: the state documents commit or abort with the write.
        with encrypted.start_session() as s:
            with s.start_transaction():
                coll.insert_one({"_id": 8, "ssn": value("f")}, session=s)
                coll.update_one({"_id": 7}, {"$set": {"ssn": value("f")}}, session=s)
        assert ids("f") == [7, 8] and ids("e") == []
        with encrypted.start_session() as s:
            s.start_transaction()
            coll.insert_one({"_id": 9, "ssn": value("f")}, session=s)
            s.abort_transaction()
        assert ids("f") == [7, 8]

        # Plain fields change as ever; the tags stay.
        coll.update_many({}, {"$inc": {"n": 1}})
        assert ids("c") == [0] and ids("d") == [2]

        with pytest.raises(WriteError) as err:
            plain.app.people.update_one({"_id": 0}, {"$set": {"__safeContent__": []}})
        assert err.value.code == 6666200
        with pytest.raises(OperationFailure) as err:
            plain.app.people.find_one_and_update({"_id": 0}, {"$unset": {"__safeContent__": 1}})
        assert err.value.code == 6666200
        # Each insert of a value wrote one ESC entry: a, b, a, c, a, d, e, f, f (the aborted
        # transaction's left nothing).
        assert plain.app["enxcol_.people.esc"].count_documents({}) == 9
        assert plain.app["enxcol_.people.ecoc"].count_documents({}) == 9
    finally:
        encrypted.close()
        ce.close()
        plain.close()
