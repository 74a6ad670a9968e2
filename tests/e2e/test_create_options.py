"""`create`'s options that decide how a collection is made, through pymongo against the real
binary, with mongod 7.0's answers: `temp` is for internal clients (72), `autoIndexId` is
noted as deprecated and `false` refused where a collection is replicated (50001) or beside
`idIndex` (72), `encryptedFields` refused on a standalone (6346402) and with capped
collections (6367301) or views (6346401), and an `idIndex` spec checked as mongod checks it
(its name corrected to `_id_`, a missing key 9, an option an `_id` index cannot have 197)."""

import pytest
from pymongo.errors import OperationFailure

NOTE = "The autoIndexId option is deprecated and will be removed in a future release"


def refused(db, name, **options):
    with pytest.raises(OperationFailure) as err:
        db.command("create", name, **options)
    assert name not in db.list_collection_names()
    return err.value


def test_temp_is_an_internal_option(db):
    err = refused(db, "t", temp=True)
    assert (err.code, err.details["codeName"]) == (72, "InvalidOptions")
    assert err.details["errmsg"] == "the 'temp' field is an invalid option"
    # `temp: false` asks for what every collection is.
    assert db.command("create", "kept", temp=False) == {"ok": 1.0}
    [entry] = db.command("listCollections", filter={"name": "kept"})["cursor"]["firstBatch"]
    assert entry["options"] == {}


def test_auto_index_id_true_is_noted(db):
    reply = db.command("create", "a", autoIndexId=True)
    assert reply == {"note": NOTE, "ok": 1.0}
    assert [i["name"] for i in db.a.list_indexes()] == ["_id_"]


def test_auto_index_id_false_is_refused_where_collections_replicate(db):
    err = refused(db, "a", autoIndexId=False)
    assert (err.code, err.details["codeName"]) == (50001, "Location50001")
    assert err.details["errmsg"] == (
        f"autoIndexId:false is not allowed for collection {db.name}.a because it can be replicated"
    )
    with pytest.raises(OperationFailure) as local:
        db.client.local.command("create", "no_id_index", autoIndexId=False)
    assert local.value.code == 115  # every collection here is a tree keyed by _id
    spec = {"key": {"_id": 1}, "name": "_id_"}
    for value in [True, False]:
        err = refused(db, "b", autoIndexId=value, idIndex=spec)
        assert err.code == 72 and "'idIndex' is not allowed with 'autoIndexId'" in str(err)
    err = refused(db, "c", autoIndexId=False, clusteredIndex={"key": {"_id": 1}, "unique": True})
    assert err.code == 6026501
    assert refused(db, "d", autoIndexId="yes").code == 14


def test_encrypted_fields_on_a_standalone(db):
    fields = {"fields": [{"path": "ssn", "bsonType": "string", "keyId": None}]}
    err = refused(db, "e", encryptedFields=fields)
    assert (err.code, err.details["codeName"]) == (6346402, "Location6346402")
    assert err.details["errmsg"] == "Encrypted collections are not supported on standalone"
    err = refused(db, "e", encryptedFields=fields, capped=True, size=4096)
    assert err.code == 6367301
    db.create_collection("base")
    err = refused(db, "v", viewOn="base", pipeline=[], encryptedFields=fields)
    assert err.code == 6346401
    assert refused(db, "e", encryptedFields=3).code == 14


def test_id_index_specs(db):
    # mongod corrects the name, as it does for any spec of the _id index.
    db.command("create", "named", idIndex={"key": {"_id": 1}, "name": "a_1", "v": 2})
    assert [i["name"] for i in db.named.list_indexes()] == ["_id_"]
    assert refused(db, "empty", idIndex={}).code == 9
    assert refused(db, "sparse", idIndex={"key": {"_id": 1}, "name": "_id_", "sparse": True}).code == 197
    assert refused(db, "other", idIndex={"key": {"a": 1}, "name": "_id_"}).code == 2
    assert refused(db, "typed", idIndex=1).code == 14
    assert refused(db, "badname", idIndex={"key": {"_id": 1}, "name": 5}).code == 14
