"""Queryable Encryption end to end, with libmongocrypt (pymongocrypt) as the client and
ground truth: on a one-member `--replSet` server, `ClientEncryption.create_encrypted_collection`
creates the collection (state collections, `__safeContent__` index, `encryptedFields` listed
back as mongod lists it); explicit encryption (indexed equality with contention 0, and
unindexed) through a client with `bypass_query_analysis` inserts documents with repeated
values; equality queries (find, count, aggregate `$match`, delete) return exactly the right
documents, decrypted; the ESC and ECOC hold what mongod's protocol V2 writes; compaction
anchors the counts and cleanup folds them into null anchors, so queries still find every
document; a user's own `__safeContent__` is refused."""

import os

import pytest
from bson.binary import STANDARD, Binary
from bson.codec_options import CodecOptions
from pymongo import MongoClient
from pymongo.encryption import Algorithm, ClientEncryption, QueryType
from pymongo.encryption_options import AutoEncryptionOpts
from pymongo.errors import WriteError


KEY_VAULT = "keyvault.datakeys"
KMS = {"local": {"key": os.urandom(96)}}
OPTS = CodecOptions(uuid_representation=STANDARD)


@pytest.fixture
def qe(primary):
    plain = primary.client()
    ce = ClientEncryption(KMS, KEY_VAULT, plain, OPTS)
    encrypted = MongoClient(
        primary.uri,
        serverSelectionTimeoutMS=5000,
        auto_encryption_opts=AutoEncryptionOpts(KMS, KEY_VAULT, bypass_query_analysis=True),
    )
    yield plain, ce, encrypted
    encrypted.close()
    ce.close()
    plain.close()


def test_equality_end_to_end(qe):
    plain, ce, encrypted = qe
    fields = {
        "fields": [
            {"path": "ssn", "bsonType": "string", "keyId": None,
             "queries": {"queryType": "equality", "contention": 0}},
            {"path": "notes", "bsonType": "string", "keyId": None},
            {"path": "email", "bsonType": "string", "keyId": None,
             "queries": {"queryType": "equality", "contention": 4}},
        ]
    }
    _, created = ce.create_encrypted_collection(plain.app, "people", fields, "local")
    ssn_key, notes_key, email_key = (f["keyId"] for f in created["fields"])

    # Listed as mongod lists it: state collection names filled in.
    [info] = plain.app.command("listCollections", filter={"name": "people"})["cursor"]["firstBatch"]
    listed = info["options"]["encryptedFields"]
    assert listed["escCollection"] == "enxcol_.people.esc"
    assert listed["ecocCollection"] == "enxcol_.people.ecoc"
    assert listed["fields"][0]["queries"]["contention"] == 0
    names = set(plain.app.list_collection_names())
    assert {"people", "enxcol_.people.esc", "enxcol_.people.ecoc"} <= names
    assert "__safeContent___1" in [i["name"] for i in plain.app.people.list_indexes()]

    def indexed(value):
        return ce.encrypt(value, Algorithm.INDEXED, key_id=ssn_key, contention_factor=0)

    def query(value):
        return ce.encrypt(value, Algorithm.INDEXED, key_id=ssn_key,
                          query_type=QueryType.EQUALITY, contention_factor=0)

    values = ["111", "222", "111", "333", "111", "222"]
    coll = encrypted.app.people
    for i, v in enumerate(values):
        notes = ce.encrypt(f"note {i}", Algorithm.UNINDEXED, key_id=notes_key)
        coll.insert_one({"_id": i, "ssn": indexed(v), "notes": notes, "plain": v})

    def ids(value):
        return sorted(d["_id"] for d in coll.find({"ssn": query(value)}))

    assert ids("111") == [0, 2, 4]
    assert ids("222") == [1, 5]
    assert ids("333") == [3]
    assert ids("444") == []
    for d in coll.find({"ssn": query("222")}):
        assert d["ssn"] == "222" and d["notes"] == f"note {d['_id']}"
        assert len(d["__safeContent__"]) == 1
    assert coll.count_documents({"ssn": query("111")}) == 3
    assert [d["_id"] for d in coll.aggregate([{"$match": {"ssn": query("333")}}])] == [3]
    assert sorted(d["_id"] for d in coll.find({"$or": [{"ssn": query("333")}, {"_id": 1}]})) == [1, 3]
    [facet] = coll.aggregate([{"$facet": {"m": [{"$match": {"ssn": query("333")}}]}}])
    assert [d["_id"] for d in facet["m"]] == [3]
    [joined] = coll.aggregate([
        {"$match": {"_id": 0}},
        {"$lookup": {"from": "people", "pipeline": [{"$match": {"ssn": query("222")}}], "as": "j"}},
    ])
    assert sorted(d["_id"] for d in joined["j"]) == [1, 5]
    explained = encrypted.app.command("explain", {"find": "people", "filter": {"ssn": query("111")}})
    assert "__safeContent__" in str(explained)

    # A contended field: each insert draws a contention factor in 0..=4, and a query with
    # contention 4 asks for the tags under every one of them.
    mails = encrypted.app.mails
    plain.app.command("create", "mails", encryptedFields={"fields": [created["fields"][2]]})
    for i in range(12):
        mails.insert_one({"_id": i, "email": ce.encrypt(
            "a@b" if i % 3 else "c@d", Algorithm.INDEXED, key_id=email_key, contention_factor=4)})
    found = mails.find({"email": ce.encrypt("a@b", Algorithm.INDEXED, key_id=email_key,
                                            query_type=QueryType.EQUALITY, contention_factor=4)})
    assert sorted(d["_id"] for d in found) == [i for i in range(12) if i % 3]

    # What is stored: the indexed value (blob subtype 14), the unindexed one as sent (16).
    raw = plain.app.people.find_one({"_id": 0})
    assert isinstance(raw["ssn"], Binary) and raw["ssn"].subtype == 6 and raw["ssn"][0] == 14
    assert raw["notes"].subtype == 6 and raw["notes"][0] == 16
    [tag] = raw["__safeContent__"]
    assert type(tag) is bytes and len(tag) == 32  # a generic (subtype 0) binary
    # One ESC non-anchor and one ECOC entry per insert.
    assert plain.app["enxcol_.people.esc"].count_documents({}) == 6
    ecoc = list(plain.app["enxcol_.people.ecoc"].find())
    assert len(ecoc) == 6 and {d["fieldName"] for d in ecoc} == {"ssn"}

    # Compaction anchors each value's count; the non-anchors and ECOC entries go.
    reply = encrypted.app.command("compactStructuredEncryptionData", "people")
    assert reply["ok"] == 1
    stats = reply["stats"]
    assert stats["esc"]["inserted"] == 3 and stats["esc"]["deleted"] == 6
    assert stats["ecoc"]["read"] == 6
    esc = list(plain.app["enxcol_.people.esc"].find())
    assert len(esc) == 3 and all("value" in d for d in esc)
    assert plain.app["enxcol_.people.ecoc"].count_documents({}) == 0
    assert ids("111") == [0, 2, 4]
    coll.insert_one({"_id": 6, "ssn": indexed("111")})
    assert ids("111") == [0, 2, 4, 6]
    assert ids("222") == [1, 5]

    # Cleanup folds each value into its null anchor and drops its anchors and non-anchors.
    reply = encrypted.app.command("cleanupStructuredEncryptionData", "people")
    assert set(reply["stats"]) == {"ecoc", "esc"}
    assert set(reply["stats"]["esc"]) == {"read", "inserted", "updated", "deleted"}
    esc = list(plain.app["enxcol_.people.esc"].find())
    assert len(esc) == 3 and all("value" in d for d in esc)
    assert ids("111") == [0, 2, 4, 6] and ids("333") == [3]
    coll.insert_one({"_id": 7, "ssn": indexed("333")})
    assert ids("333") == [3, 7]

    # Deletes by an encrypted equality filter.
    assert coll.delete_many({"ssn": query("222")}).deleted_count == 2
    assert ids("222") == []

    # A user's own __safeContent__ is mongod's BadValue.
    with pytest.raises(WriteError) as err:
        plain.app.people.insert_one({"_id": 10, "__safeContent__": [1]})
    assert err.value.code == 2
    assert "Cannot insert a document with field name __safeContent__" in str(err.value)

    # The driver drops the state collections itself; the server drops what it is asked to.
    plain.app.drop_collection("people", encrypted_fields=listed)
    assert not {"people", "enxcol_.people.esc", "enxcol_.people.ecoc"} & set(plain.app.list_collection_names())
