"""Collections and databases through pymongo against the real binary: create (a repeat
with the same options is a no-op, with others 48 NamespaceExists; validator options stored, time series refused with 115, unknown
options 40415), drop, dropDatabase, listCollections (with filters and
nameOnly), listDatabases, renameCollection (48 onto an existing target, dropTarget replaces
it, 26 for a missing source, indexes go along), collStats and dbStats (count, size,
nindexes, objects), validate (valid: true, records and keys per index), and names MongoDB
refuses (73 InvalidNamespace).

The last tests stop the server (SIGTERM, and SIGKILL after journaled writes) and start it
again on the same data directory: every document, index and count must still be there."""

import signal

import bson
import pytest
from pymongo import WriteConcern
from pymongo.errors import DuplicateKeyError, OperationFailure

from conftest import Server
from wire_client import RawConnection


def test_create_and_namespace_exists_on_repeat(db):
    reply = db.command("create", "made")
    assert reply == {"ok": 1.0}
    assert "made" in db.list_collection_names()
    assert db.made.count_documents({}) == 0
    db.made.insert_one({"kept": True})
    # mongod 7.0's create is idempotent: the same options again change nothing.
    assert db.command("create", "made") == {"ok": 1.0}
    assert db.made.count_documents({}) == 1
    with pytest.raises(OperationFailure) as err:
        db.command("create", "made", validator={"a": {"$exists": True}})
    assert err.value.code == 48
    assert err.value.details["codeName"] == "NamespaceExists"
    assert err.value.details["errmsg"].startswith(
        f"namespace {db.name}.made already exists, but with different options: {{ uuid: UUID(")


def test_create_options(db):
    validator = {"a": {"$type": "int"}}
    db.command("create", "v", validator=validator, validationLevel="moderate",
               writeConcern={"w": 1}, comment="kept out of the options", capped=False)
    [entry] = db.command("listCollections", filter={"name": "v"})["cursor"]["firstBatch"]
    assert entry["options"] == {"validator": validator, "validationLevel": "moderate"}
    # Capped, clustered and time series collections are built (test_capped.py,
    # test_clustered.py, test_timeseries.py). The rest of create's options:
    # test_create_options.py.
    for field in ["flavour", "recordIdsReplicated"]:  # the second is mongod 8.0's
        with pytest.raises(OperationFailure) as err:
            db.command("create", "refused", **{field: True})
        assert err.value.code == 40415
        assert f"create.{field}" in str(err.value)
    assert sorted(db.list_collection_names()) == ["v"]


def test_drop(db):
    db.c.insert_many([{"a": i} for i in range(10)])
    db.c.create_index("a")
    reply = db.command("drop", "c")
    assert reply["nIndexesWas"] == 2 and reply["ns"] == f"{db.name}.c"
    assert "c" not in db.list_collection_names()
    assert db.c.count_documents({}) == 0
    db.c.drop()  # dropping what is not there is not an error for the driver
    db.c.insert_one({"fresh": True})
    assert list(db.c.find({}, {"_id": 0})) == [{"fresh": True}]
    assert [i["name"] for i in db.c.list_indexes()] == ["_id_"]


def test_drop_database(shared_client, db):
    db.a.insert_one({})
    db.b.insert_one({})
    assert db.name in shared_client.list_database_names()
    shared_client.drop_database(db.name)
    assert db.name not in shared_client.list_database_names()
    assert db.list_collection_names() == []
    assert db.a.count_documents({}) == 0


def test_list_collections(db):
    for name in ["apple", "apricot", "banana"]:
        db.create_collection(name)
    assert sorted(db.list_collection_names()) == ["apple", "apricot", "banana"]
    assert sorted(db.list_collection_names(filter={"name": {"$regex": "^ap"}})) == [
        "apple", "apricot"]
    entries = {c["name"]: c for c in db.list_collections()}
    assert entries["banana"]["type"] == "collection"
    assert entries["banana"]["options"] == {}
    assert entries["banana"]["info"]["readOnly"] is False
    assert entries["banana"]["idIndex"]["key"] == {"_id": 1}
    [only] = db.list_collections(filter={"name": "banana"})
    assert only["name"] == "banana"
    reply = db.command("listCollections", nameOnly=True)
    assert reply["cursor"]["ns"] == f"{db.name}.$cmd.listCollections"
    assert sorted(c["name"] for c in reply["cursor"]["firstBatch"]) == [
        "apple", "apricot", "banana"]
    assert all(set(c) == {"name", "type"} for c in reply["cursor"]["firstBatch"])


def test_list_database_names(shared_client, db):
    assert db.name not in shared_client.list_database_names()
    db.c.insert_one({})
    assert db.name in shared_client.list_database_names()
    listed = {d["name"]: d for d in shared_client.list_databases()}
    assert listed[db.name]["empty"] is False
    assert "sizeOnDisk" in listed[db.name]
    reply = shared_client.admin.command("listDatabases", nameOnly=True)
    assert {"name": db.name} in reply["databases"]


def test_rename(shared_client, db):
    db.src.insert_many([{"_id": i, "k": i} for i in range(5)])
    db.src.create_index("k", unique=True)
    db.src.rename("dst")
    assert sorted(db.list_collection_names()) == ["dst"]
    assert db.dst.count_documents({}) == 5
    assert {i["name"] for i in db.dst.list_indexes()} == {"_id_", "k_1"}
    with pytest.raises(DuplicateKeyError):
        db.dst.insert_one({"k": 3})


def test_rename_onto_an_existing_collection(db):
    db.a.insert_one({"from": "a"})
    db.b.insert_one({"from": "b"})
    with pytest.raises(OperationFailure) as err:
        db.a.rename("b")
    assert err.value.code == 48
    assert err.value.details["codeName"] == "NamespaceExists"
    assert db.b.find_one({}, {"_id": 0}) == {"from": "b"}
    db.a.rename("b", dropTarget=True)
    assert db.list_collection_names() == ["b"]
    assert list(db.b.find({}, {"_id": 0})) == [{"from": "a"}]


def test_rename_of_a_missing_collection_is_namespace_not_found(db):
    with pytest.raises(OperationFailure) as err:
        db.nothing.rename("other")
    assert err.value.code == 26
    assert err.value.details["codeName"] == "NamespaceNotFound"


def test_coll_stats(db):
    docs = [{"_id": i, "s": "x" * i} for i in range(100)]
    db.c.insert_many(docs)
    db.c.create_index("s")
    stats = db.command("collStats", "c")
    assert stats["ns"] == f"{db.name}.c"
    assert stats["count"] == 100
    assert stats["size"] == sum(len(bson.encode(d)) for d in docs)
    assert stats["nindexes"] == 2
    assert set(stats["indexSizes"]) == {"_id_", "s_1"}
    assert stats["totalIndexSize"] == sum(stats["indexSizes"].values())
    db.c.delete_many({"_id": {"$lt": 50}})
    after = db.command("collStats", "c")
    assert after["count"] == 50
    assert after["size"] == sum(len(bson.encode(d)) for d in docs[50:])


def test_db_stats(db):
    db.a.insert_many([{"i": i} for i in range(30)])
    db.b.insert_many([{"i": i} for i in range(12)])
    db.b.create_index("i")
    stats = db.command("dbStats")
    assert stats["db"] == db.name
    assert stats["collections"] == 2
    assert stats["objects"] == 42
    assert stats["indexes"] == 3
    assert stats["dataSize"] == db.command("collStats", "a")["size"] + db.command(
        "collStats", "b")["size"]


def test_validate(db):
    db.c.insert_many([{"_id": i, "a": i % 10, "t": [i, i + 1]} for i in range(200)])
    db.c.create_index("a")
    db.c.create_index("t")
    result = db.validate_collection("c")
    assert result["valid"] is True
    assert result["ns"] == f"{db.name}.c"
    assert result["nrecords"] == 200
    assert result["nIndexes"] == 3
    assert result["keysPerIndex"] == {"_id_": 200, "a_1": 200, "t_1": 400}
    assert result["errors"] == []


def test_validate_of_a_missing_collection_is_namespace_not_found(db):
    with pytest.raises(OperationFailure) as err:
        db.command("validate", "nothing")
    assert err.value.code == 26


@pytest.mark.parametrize("name", ["a$b", "", ".lead", "nul\x00"], ids=repr)
def test_invalid_collection_names(db, name):
    with pytest.raises(OperationFailure) as err:
        db.command("create", name)
    assert err.value.code == 73
    assert err.value.details["codeName"] == "InvalidNamespace"


def test_insert_into_an_invalid_collection_name(db):
    with pytest.raises(OperationFailure) as err:
        db.command("insert", "bad$name", documents=[{}])
    assert err.value.code == 73


@pytest.mark.parametrize("name", ["has space", "has.dot", "sl/ash", 'quo"te', "a" * 64])
def test_invalid_database_names(shared_server, name):
    # pymongo refuses these names itself, so send the commands raw.
    with RawConnection(shared_server.port) as conn:
        reply = conn.command({"insert": "c", "documents": [{}], "$db": name}).doc
    assert reply["ok"] == 0.0
    assert reply["code"] == 73 and reply["codeName"] == "InvalidNamespace"


def fill(client):
    db = client.persist
    db.items.insert_many([{"_id": i, "k": f"key{i:05}", "n": i % 13, "tags": [i % 3, i % 5]}
                          for i in range(3000)])
    db.items.create_index("k", unique=True)
    db.items.create_index([("n", 1), ("_id", -1)])
    db.items.create_index("tags")
    db.items.update_many({"n": 0}, {"$set": {"zero": True}})
    db.items.delete_many({"_id": {"$gte": 2900}})
    db.other.insert_one({"_id": "x", "nested": {"a": [1, {"b": 2}]}})
    db.create_collection("empty")


def check(client):
    db = client.persist
    assert sorted(db.list_collection_names()) == ["empty", "items", "other"]
    assert db.items.count_documents({}) == 2900
    assert db.items.estimated_document_count() == 2900
    assert db.items.count_documents({"zero": True}) == len([i for i in range(2900) if i % 13 == 0])
    assert db.items.find_one({"_id": 1234}) == {"_id": 1234, "k": "key01234", "n": 1234 % 13,
                                                "tags": [1234 % 3, 1234 % 5]}
    assert {i["name"] for i in db.items.list_indexes()} == {"_id_", "k_1", "n_1__id_-1", "tags_1"}
    newest = [i for i in range(2899, -1, -1) if i % 13 == 5][:3]
    assert [d["_id"] for d in db.items.find({"n": 5}).sort([("n", 1), ("_id", -1)]).hint(
        "n_1__id_-1").limit(3)] == newest
    assert db.items.count_documents({"tags": 4}, hint="tags_1") == len(
        [i for i in range(2900) if i % 5 == 4])
    with pytest.raises(DuplicateKeyError):
        db.items.insert_one({"k": "key00007"})
    assert db.other.find_one() == {"_id": "x", "nested": {"a": [1, {"b": 2}]}}
    assert db.empty.count_documents({}) == 0
    assert db.validate_collection("items")["valid"] is True


def test_data_survives_a_restart(tmp_path):
    srv = Server(tmp_path / "data")
    client = srv.client()
    fill(client)
    check(client)
    client.close()
    assert srv.stop(signal.SIGTERM) == 0
    srv = Server(tmp_path / "data")
    try:
        client = srv.client()
        check(client)
        client.persist.items.insert_one({"_id": "after", "k": "after"})
        client.close()
    finally:
        srv.stop()
    srv = Server(tmp_path / "data")
    try:
        client = srv.client()
        assert client.persist.items.count_documents({}) == 2901
        client.close()
    finally:
        srv.stop()


def test_journaled_writes_survive_a_kill(tmp_path):
    srv = Server(tmp_path / "data")
    client = srv.client(w=1, journal=True)
    fill(client)
    client.close()
    srv.stop(signal.SIGKILL)
    srv = Server(tmp_path / "data")
    try:
        client = srv.client()
        check(client)
        client.close()
    finally:
        srv.stop()
