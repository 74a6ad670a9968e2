"""Command options mongod 7.0 honours that were mis-read or ignored (issue 26 item 5), with
pymongo against the real binary: each is now honoured or refused with mongod's code.

- `delete`'s `limit` is compared as a double (0.5 is `FailedToParse` 9, nothing deleted);
- `dropDatabase` drops only for 1 (`Location5255100` otherwise, 14 for a non-number);
- `aggregate` needs `cursor` unless it explains (9), as every mongod since 3.6;
- resuming a scan by record id (`$_requestResumeToken`, `$_resumeAfter`) is not built: 238;
- `createIndexes`: wildcard keys are not built (67), `commitQuorum` on a standalone is
  `BadValue` (2), `ignoreUnknownIndexOptions: true` strips what it does not know;
- `create` takes the generic arguments drivers send with every command (`maxTimeMS`);
- `collMod`'s mongod 8.0 options (`dryRun`, `recordIdsReplicated`) are unknown fields (40415).
`noCursorTimeout` (a find cursor kept past the idle timeout) is tested beside the cursor
table (`cursors::tests`), where time can be moved."""

import uuid as uuid_module

import bson
import pytest
from pymongo.errors import OperationFailure


def code(fn):
    with pytest.raises(OperationFailure) as err:
        fn()
    return err.value.code


def test_delete_limit_is_zero_or_one_as_a_double(db):
    db.c.insert_many([{"x": 1} for _ in range(3)])
    for limit in [0.5, 1.5, 2]:
        assert code(lambda: db.command("delete", "c", deletes=[{"q": {}, "limit": limit}])) == 9
    assert db.c.count_documents({}) == 3
    assert db.command("delete", "c", deletes=[{"q": {}, "limit": 1.0}])["n"] == 1
    assert db.command("delete", "c", deletes=[{"q": {}, "limit": 0.0}])["n"] == 2


def test_drop_database_wants_one(client):
    db = client.keepme
    db.c.insert_one({"kept": True})
    assert code(lambda: db.command("dropDatabase", 0)) == 5255100
    assert code(lambda: db.command("dropDatabase", "yes")) == 14
    assert db.c.count_documents({}) == 1
    assert db.command("dropDatabase", 1)["dropped"] == "keepme"
    assert "keepme" not in client.list_database_names()


def test_aggregate_needs_a_cursor_unless_it_explains(db):
    db.c.insert_one({"x": 1})
    assert code(lambda: db.command("aggregate", "c", pipeline=[])) == 9
    assert code(lambda: db.command("aggregate", 1, pipeline=[{"$documents": [{}]}])) == 9
    assert "cursor" not in db.command("aggregate", "c", pipeline=[], explain=True)
    assert db.command("aggregate", "c", pipeline=[], cursor={})["cursor"]["firstBatch"]


def test_resuming_a_scan_by_record_id_is_not_built(db):
    db.c.insert_one({"x": 1})
    assert code(lambda: db.command("find", "c", **{"$_requestResumeToken": True, "hint": {"$natural": 1}})) == 238
    assert code(lambda: db.command("find", "c", **{"$_resumeAfter": {"$recordId": 1}})) == 238
    assert code(lambda: db.command("aggregate", "c", pipeline=[], cursor={}, **{"$_requestResumeToken": True})) == 238
    assert db.command("find", "c", **{"$_requestResumeToken": False})["cursor"]["firstBatch"]


def test_create_indexes_options(db):
    db.c.insert_one({"a": {"b": 1}})
    for key in [{"$**": 1}, {"a.$**": 1}]:
        assert code(lambda: db.command("createIndexes", "c", indexes=[{"key": key, "name": "w"}])) == 67
    assert code(lambda: db.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "a_1"}],
                                   commitQuorum="majority")) == 2
    unknown = [{"key": {"a": 1}, "name": "a_1", "flavour": "mint"}]
    assert code(lambda: db.command("createIndexes", "c", indexes=unknown)) == 197
    db.command("createIndexes", "c", indexes=unknown, ignoreUnknownIndexOptions=True)
    [spec] = [i for i in db.c.list_indexes() if i["name"] == "a_1"]
    assert "flavour" not in spec and spec["key"] == {"a": 1}


def test_create_takes_generic_arguments(db):
    assert db.command("create", "c", maxTimeMS=5000) == {"ok": 1.0}
    assert db.command("create", "v", viewOn="c", pipeline=[], maxTimeMS=5000) == {"ok": 1.0}


def test_coll_mod_refuses_mongod_8_options_as_unknown(db):
    db.create_collection("c")
    for field in ["dryRun", "recordIdsReplicated"]:
        assert code(lambda: db.command("collMod", "c", **{field: True})) == 40415


def test_strictly_parsed_commands_refuse_unknown_fields(db):
    """mongod 7.0 parses these commands strictly: a misspelt option is `Location40415`, not
    a run with the default (`known_fields.rs`); generic and `$` fields pass."""
    db.c.insert_one({"x": 1})
    cases = [
        ("find", "c", {"filtr": {}}),
        ("insert", "c", {"documents": [{}], "orderd": False}),
        ("update", "c", {"updates": [{"q": {}, "u": {"$set": {"y": 1}}}], "upsert": True}),
        ("delete", "c", {"deletes": [{"q": {}, "limit": 0}], "multi": True}),
        ("findAndModify", "c", {"query": {}, "update": {"$set": {"y": 1}}, "returnNewDocument": True}),
        ("aggregate", "c", {"pipeline": [], "cursor": {}, "allowDiskuse": True}),
        ("count", "c", {"filter": {"x": 2}}),
        ("distinct", "c", {"key": "x", "filter": {}}),
        ("createIndexes", "c", {"indexes": [{"key": {"y": 1}, "name": "y_1"}], "background": True}),
        ("listIndexes", "c", {"nameOnly": True}),
        ("drop", "c", {"force": True}),
    ]
    for name, coll, fields in cases:
        with pytest.raises(OperationFailure) as err:
            db.command(name, coll, **fields)
        assert err.value.code == 40415, name
        assert "is an unknown field" in str(err.value), name
    assert db.c.count_documents({}) == 1 and db.c.find_one()["x"] == 1
    assert "y_1" not in [i["name"] for i in db.c.list_indexes()]
    # Generic arguments and `$` fields pass.
    reply = db.command("find", "c", filter={}, comment="c", maxTimeMS=1000, readConcern={"level": "local"})
    assert reply["cursor"]["firstBatch"]


def test_server_status_leaves_out_the_sections_asked_off(client):
    status = client.admin.command({"serverStatus": 1, "metrics": 0, "opcounters": False, "host": 0})
    assert "metrics" not in status and "opcounters" not in status
    assert "connections" in status and "mem" in status
    assert status["host"]  # not a section: always sent, as mongod sends it


def test_listings_refuse_a_negative_batch_size(db):
    db.c.insert_one({})
    for name in ["listCollections", "listIndexes"]:
        args = {"cursor": {"batchSize": -1}}
        with pytest.raises(OperationFailure) as err:
            db.command(name, 1 if name == "listCollections" else "c", **args)
        assert err.value.code == 2, name


def test_write_flags_are_booleans(db):
    """mongod's IDL types `ordered`, `multi` and `upsert` as `bool`: a number is 14."""
    assert code(lambda: db.command("insert", "c", documents=[{}], ordered=1)) == 14
    # A statement's are too, and fail the whole command before anything is written.
    for flag in ["multi", "upsert"]:
        update = {"q": {}, "u": {"$set": {"a": 1}}, flag: 1}
        assert code(lambda: db.command("update", "c", updates=[update])) == 14, flag
    assert code(lambda: db.command("delete", "c", deletes=[{"q": {}, "limit": 0}], ordered=0)) == 14
    assert db.c.count_documents({}) == 0


def test_index_versions(db):
    db.c.insert_one({"a": 1, "b": 1})
    db.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "a_1", "v": 1}])
    specs = {i["name"]: i for i in db.c.list_indexes()}
    assert specs["a_1"]["v"] == 1
    for v in [0, 3, 2.5]:
        assert code(lambda: db.command("createIndexes", "c", indexes=[{"key": {"b": 1}, "name": "b_1", "v": v}])) == 67
    assert code(lambda: db.command("createIndexes", "c", indexes=[{"key": {"b": 1}, "name": "b_1", "v": "2"}])) == 14


def test_a_hidden_index_is_kept_but_never_planned(db):
    db.c.insert_many([{"a": i} for i in range(50)])
    db.command("createIndexes", "c", indexes=[{"key": {"a": 1}, "name": "a_1", "hidden": True}])
    spec = [i for i in db.c.list_indexes() if i["name"] == "a_1"][0]
    assert spec["hidden"] is True
    plan = db.command("explain", {"find": "c", "filter": {"a": 7}})["queryPlanner"]["winningPlan"]
    assert plan["stage"] != "IXSCAN" and "a_1" not in str(plan)
    assert code(lambda: db.command("find", "c", filter={"a": 7}, hint="a_1")) == 2
    assert code(lambda: db.command("find", "c", filter={"a": 7}, hint={"a": 1})) == 2
    assert [d["a"] for d in db.c.find({"a": 7})] == [7]
    # Still maintained: visible again through a new, unhidden index's results match.
    db.c.insert_one({"a": 1000})
    assert db.command("validate", "c")["valid"]


def test_collection_uuid_must_name_the_collection(client):
    """`collectionUUID` as mongod 7.0's jstests check it (`collection_uuid_find.js`): the
    command fails with 361 and names the collection that has the UUID, in the same
    database, or null."""
    db = client.uuids
    db.coll.insert_one({"_id": 0})
    db.coll_2.insert_one({"_id": 1})
    uuid = [c for c in db.command("listCollections")["cursor"]["firstBatch"]
            if c["name"] == "coll"][0]["info"]["uuid"]
    assert db.command("find", "coll", collectionUUID=uuid)["cursor"]["firstBatch"] == [{"_id": 0}]

    def mismatch(database, name, want_actual, command="find", **args):
        with pytest.raises(OperationFailure) as err:
            database.command(command, name, collectionUUID=uuid, **args)
        d = err.value.details
        assert (d["code"], d["codeName"]) == (361, "CollectionUUIDMismatch")
        assert d["db"] == database.name and d["collectionUUID"] == uuid
        assert d["expectedCollection"] == name and d["actualCollection"] == want_actual

    mismatch(db, "coll_2", "coll")
    mismatch(client.uuids_other, "coll_3", None)
    db.create_collection("view", viewOn="coll", pipeline=[])
    mismatch(db, "view", "coll")
    # Writes and DDL check it before they change anything.
    mismatch(db, "coll_2", "coll", command="insert", documents=[{"_id": 9}])
    mismatch(db, "coll_2", "coll", command="delete", deletes=[{"q": {}, "limit": 0}])
    mismatch(db, "coll_2", "coll", command="drop")
    assert db.coll_2.count_documents({}) == 1
    other = bson.binary.Binary.from_uuid(uuid_module.uuid4())
    with pytest.raises(OperationFailure) as err:
        db.command("find", "coll", collectionUUID=other)
    assert err.value.code == 361 and err.value.details["actualCollection"] is None
    with pytest.raises(OperationFailure) as err:
        db.command("find", "coll", collectionUUID="not a uuid")
    assert err.value.code == 14
    assert db.command("insert", "coll", documents=[{"_id": 5}], collectionUUID=uuid)["n"] == 1
    # Only the commands whose mongod 7.0 field list has it take it.
    with pytest.raises(OperationFailure) as err:
        db.command("count", "coll", collectionUUID=uuid)
    assert err.value.code == 40415


def test_stable_api_parameters(shared_server, db):
    """`apiVersion` must be "1"; `apiStrict`/`apiDeprecationErrors` need it; under
    `apiStrict: true` only API version 1's commands run (mongod's 322, 4886600, 323)."""
    assert code(lambda: db.command("ping", apiVersion="2")) == 322
    assert code(lambda: db.command("ping", apiStrict=True)) == 4886600
    assert code(lambda: db.command("ping", apiDeprecationErrors=False)) == 4886600
    assert code(lambda: db.command("ping", apiVersion=1)) == 14
    assert code(lambda: db.command("buildInfo", apiVersion="1", apiStrict=True)) == 323
    assert db.command("buildInfo", apiVersion="1", apiStrict=False)["ok"] == 1.0
    # A driver declaring the strict API runs its CRUD and cursors as usual.
    from pymongo.server_api import ServerApi
    strict = shared_server.client(server_api=ServerApi("1", strict=True, deprecation_errors=True))
    try:
        coll = strict[db.name].api
        coll.insert_many([{"_id": i} for i in range(150)])
        assert len(list(coll.find({}, batch_size=20))) == 150
        assert coll.count_documents({"_id": {"$lt": 10}}) == 10
        with pytest.raises(OperationFailure) as err:
            strict[db.name].command("listCommands")
        assert err.value.code == 323
    finally:
        strict.close()


def test_stable_api_strict_refuses_unstable_fields(db):
    """Under `apiStrict: true` a version-1 command's field that mongod 7.0's IDL marks
    unstable is APIStrictError 323 with the IDL parser's message, before the command runs;
    stable fields (find's `allowPartialResults`) run, and so does the field without
    `apiStrict`."""
    strict = {"apiVersion": "1", "apiStrict": True}
    db.c.insert_one({"_id": 1, "a": 1})
    for field, value in (("returnKey", False), ("showRecordId", False), ("min", {"a": 1}),
                         ("noCursorTimeout", False), ("tailable", False)):
        with pytest.raises(OperationFailure) as err:
            db.command({"find": "c", field: value, **strict})
        assert err.value.code == 323, field
        assert err.value.details["errmsg"] == (
            f"BSON field 'find.{field}' is not allowed with apiStrict:true.")
    cases = [
        ({"aggregate": "c", "pipeline": [], "explain": True}, "aggregate.explain"),
        ({"listIndexes": "c", "includeBuildUUIDs": True}, "listIndexes.includeBuildUUIDs"),
        ({"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1"}],
          "ignoreUnknownIndexOptions": True}, "createIndexes.ignoreUnknownIndexOptions"),
        ({"listCollections": 1, "includePendingDrops": True},
         "listCollections.includePendingDrops"),
    ]
    for cmd, path in cases:
        with pytest.raises(OperationFailure) as err:
            db.command({**cmd, **strict})
        assert err.value.code == 323, path
        assert err.value.details["errmsg"] == f"BSON field '{path}' is not allowed with apiStrict:true."
    # Nothing was created by the refused createIndexes.
    assert [i["name"] for i in db.c.list_indexes()] == ["_id_"]
    assert db.command({"find": "c", "allowPartialResults": True, **strict})["ok"] == 1.0
    assert db.command({"find": "c", "showRecordId": False, "apiVersion": "1",
                       "apiStrict": False})["ok"] == 1.0
    assert db.command({"find": "c", "returnKey": False})["ok"] == 1.0


def test_update_constants_bind_for_pipeline_updates(db):
    db.c.insert_one({"_id": 1, "b": 2})
    reply = db.command("update", "c", updates=[{
        "q": {"_id": 1}, "u": [{"$set": {"a": "$$x", "lit": "$$s", "sum": {"$add": ["$b", "$$x"]}}}],
        "c": {"x": 5, "s": "$b"}}])
    assert reply["nModified"] == 1
    assert db.c.find_one({"_id": 1}) == {"_id": 1, "b": 2, "a": 5, "lit": "$b", "sum": 7}
    reply = db.command("update", "c", updates=[{"q": {}, "u": {"$set": {"a": 1}}, "c": {"x": 1}}])
    assert reply["n"] == 0 and reply["writeErrors"][0]["code"] == 51198
    assert code(lambda: db.command(
        "update", "c", updates=[{"q": {}, "u": [{"$set": {"a": 1}}], "c": 3}])) == 14
    reply = db.command("update", "c", updates=[{"q": {"_id": 9}, "u": [{"$set": {"a": 1}}],
                                               "upsert": True, "upsertSupplied": True,
                                               "c": {"new": {"_id": 9}}}])
    assert reply["writeErrors"][0]["code"] == 238
    assert db.c.count_documents({}) == 1


def test_explain_plans_the_wrapped_commands_own_options(db):
    """explain of count/update/delete/findAndModify plans with the command's hint, skip and
    limit (they were dropped, so the plan and executionStats were a bare filter's)."""
    db.c.insert_many([{"a": i, "b": i % 2} for i in range(10)])
    db.c.create_index("a")

    def explained(inner):
        return db.command("explain", inner, verbosity="executionStats")

    e = explained({"count": "c", "query": {"b": 0}, "hint": "a_1", "skip": 1, "limit": 2})
    assert e["queryPlanner"]["winningPlan"]["stage"] == "IXSCAN" or "a_1" in str(e["queryPlanner"])
    assert e["executionStats"]["nReturned"] == 2
    e = explained({"update": "c", "updates": [{"q": {"b": 1}, "u": {"$set": {"x": 1}}, "hint": {"a": 1}}]})
    assert "a_1" in str(e["queryPlanner"]["winningPlan"]) and e["executionStats"]["nReturned"] == 1
    e = explained({"delete": "c", "deletes": [{"q": {"b": 1}, "limit": 0}]})
    assert e["executionStats"]["nReturned"] == 5
    e = explained({"findAndModify": "c", "query": {"b": 1}, "sort": {"a": -1}, "remove": True})
    assert e["executionStats"]["nReturned"] == 1
    assert db.c.count_documents({}) == 10  # explain changed nothing


def test_validate_options(db):
    db.c.insert_many([{"a": i} for i in range(5)])
    assert db.command("validate", "c", full=True, checkBSONConformance=True)["valid"]
    assert db.command("validate", "c", background=True)["valid"]
    assert db.command("validate", "c", enforceFastCount=True)["valid"]
    assert code(lambda: db.command("validate", "c", background=True, full=True)) == 72
    assert code(lambda: db.command("validate", "c", repair=True)) == 238
    assert code(lambda: db.command("validate", "c", metadata=True)) == 238
    assert code(lambda: db.command("validate", "c", full="yes")) == 14


def test_list_indexes_build_info_forms(db):
    db.c.create_index("a")
    plain = db.command("listIndexes", "c")["cursor"]["firstBatch"]
    wrapped = db.command("listIndexes", "c", includeIndexBuildInfo=True)["cursor"]["firstBatch"]
    assert wrapped == [{"spec": s} for s in plain]
    assert db.command("listIndexes", "c", includeBuildUUIDs=True)["cursor"]["firstBatch"] == plain
    assert code(lambda: db.command("listIndexes", "c", includeIndexBuildInfo=True, includeBuildUUIDs=True)) == 72
