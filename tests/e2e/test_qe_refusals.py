"""Queryable Encryption's refusals on a one-member `--replSet` server, with mongod 7.0's
codes: `create`'s `encryptedFields` checks (duplicate key ids 6338401 and paths 6338402,
prefix paths 6338403, wrong shapes 14/40414/40415, an equality type mongod does not index
6338405, `rangePreview` not built here: 115), the listing of a `create` sent without the
driver's helper, writes whose encrypted values do not fit the configuration (7293205,
7293207, 6371508), and compaction without its tokens (6346806) or on a plain collection
(6346807). The standalone's refusal is `test_create_options.py`'s."""

import uuid

import pytest
from bson.binary import Binary, UuidRepresentation
from pymongo.errors import OperationFailure, WriteError


def key(n):
    return Binary.from_uuid(uuid.UUID(int=n), UuidRepresentation.STANDARD)


def field(path, n, **extra):
    return {"path": path, "keyId": key(n), "bsonType": "string", **extra}


EQ = {"queryType": "equality", "contention": 0}


@pytest.fixture
def app(primary):
    c = primary.client()
    yield c.app
    c.close()


def refused(app, name, fields):
    with pytest.raises(OperationFailure) as err:
        app.command("create", name, encryptedFields=fields)
    assert name not in app.list_collection_names()
    return err.value.code


def test_create_checks_encrypted_fields(app):
    assert refused(app, "c", {"fields": [field("a", 1), field("b", 1)]}) == 6338401
    assert refused(app, "c", {"fields": [field("a", 1), field("a", 2)]}) == 6338402
    assert refused(app, "c", {"fields": [field("a", 1), field("a.b", 2)]}) == 6338403
    assert refused(app, "c", {"fields": [{"path": "a", "keyId": 1}]}) == 14
    assert refused(app, "c", {"fields": [{"path": "a"}]}) == 40414
    assert refused(app, "c", {"fields": [field("a", 1, other=1)]}) == 40415
    assert refused(app, "c", {"fields": [], "other": 1}) == 40415
    assert refused(app, "c", {"fields": [field("a", 1, bsonType="double", queries=EQ)]}) == 6338405
    ranged = {"queryType": "rangePreview", "sparsity": 1, "min": 0, "max": 9, "contention": 0}
    assert refused(app, "c", {"fields": [field("a", 1, bsonType="int", queries=ranged)]}) == 115


def test_create_lists_as_mongod_does(app):
    app.command("create", "c", encryptedFields={"fields": [field("ssn", 1, queries={"queryType": "equality"})]})
    [info] = app.command("listCollections", filter={"name": "c"})["cursor"]["firstBatch"]
    assert info["options"] == {
        "encryptedFields": {
            "escCollection": "enxcol_.c.esc",
            "ecocCollection": "enxcol_.c.ecoc",
            "fields": [
                {"path": "ssn", "keyId": key(1), "bsonType": "string",
                 "queries": {"queryType": "equality", "contention": 8}},
            ],
        }
    }
    for state in ["enxcol_.c.esc", "enxcol_.c.ecoc"]:
        [s] = app.command("listCollections", filter={"name": state})["cursor"]["firstBatch"]
        assert s["options"]["clusteredIndex"]["key"] == {"_id": 1}
    assert [i["key"] for i in app.c.list_indexes()] == [{"_id": 1}, {"__safeContent__": 1}]
    # The same create again is mongod's idempotent no-op.
    app.command("create", "c", encryptedFields={"fields": [field("ssn", 1, queries={"queryType": "equality"})]})


def test_writes_must_fit_the_configuration(app):
    app.command("create", "c", encryptedFields={"fields": [field("ssn", 1, queries=EQ), field("notes", 2)]})

    def payload(blob_subtype):
        return Binary(bytes([blob_subtype]) + b"\x05\x00\x00\x00\x00", 6)

    for doc, code in [
        ({"ssn": payload(16)}, 7293205),  # an unindexed value in an equality field
        ({"ssn": payload(12)}, 7293205),  # a find payload
        ({"notes": payload(14)}, 7293207),  # an indexed value in an unindexed field
        ({"other": payload(16)}, 6371508),  # not an encrypted field at all
        ({"__safeContent__": []}, 2),
    ]:
        with pytest.raises(WriteError) as err:
            app.c.insert_one(doc)
        assert err.value.code == code, doc
    assert app.c.count_documents({}) == 0
    assert app["enxcol_.c.esc"].count_documents({}) == 0
    # Plain fields and no encrypted ones: an ordinary document.
    app.c.insert_one({"_id": 1, "x": 1})


def test_compaction_needs_its_tokens(app):
    app.command("create", "c", encryptedFields={"fields": [field("ssn", 1, queries=EQ)]})
    with pytest.raises(OperationFailure) as err:
        app.command("compactStructuredEncryptionData", "c", compactionTokens={})
    assert err.value.code == 6346806
    app.create_collection("plain")
    with pytest.raises(OperationFailure) as err:
        app.command("compactStructuredEncryptionData", "plain", compactionTokens={})
    assert err.value.code == 6346807
    reply = app.command("compactStructuredEncryptionData", "c", compactionTokens={"ssn": Binary(bytes(32))})
    assert reply["stats"] == {
        "ecoc": {"read": 0, "deleted": 0},
        "esc": {"read": 0, "inserted": 0, "updated": 0, "deleted": 0},
    }
