"""Replies typed as mongod types them, and what a standalone cannot do refused loudly (issue 26,
items 4 and 5), with pymongo against the real binary. pymongo decodes a BSON int32 as `int`,
an int64 as `bson.int64.Int64` and a double as `float`, so `type(x)` tells the three apart.

- collStats counts and sizes are int32 when they fit (mongod's `appendNumber`), `avgObjSize`,
  `nindexes` and `scaleFactor` int32; dbStats' `collections`, `views`, `objects`, `indexes`
  int32 and its sizes doubles, `fsUsedSize`/`fsTotalSize` the data directory's file system;
- `explain.serverInfo` and `serverStatus.host` name the real host and port;
- `writeConcern` `w > 1` or a tag mode is `BadValue`; a tailable find is refused as mongod
  refuses one on a collection that is not capped;
- a client that disconnects is not logged as a framing failure."""

import os
import socket

import pytest
from bson.int64 import Int64
from pymongo import WriteConcern
from pymongo.errors import OperationFailure

from conftest import Server


def test_coll_stats_counts_and_sizes_are_int32_when_they_fit(client):
    coll = client.app.items
    coll.insert_many([{"x": i, "pad": "p" * 50} for i in range(20)])
    coll.create_index("x")
    stats = client.app.command("collStats", "items")
    for field in ["count", "size", "storageSize", "totalIndexSize", "totalSize", "avgObjSize",
                  "nindexes", "scaleFactor", "freeStorageSize"]:
        assert type(stats[field]) is int, (field, type(stats[field]))
    assert stats["count"] == 20
    assert all(type(v) is int for v in stats["indexSizes"].values()), stats["indexSizes"]


def test_db_stats_types_and_file_system_sizes(client, server):
    client.app.a.insert_one({"x": 1})
    client.app.create_collection("v", viewOn="a", pipeline=[])
    stats = client.app.command("dbStats")
    for field in ["collections", "views", "objects", "indexes"]:
        assert type(stats[field]) is int, (field, type(stats[field]))
    assert (stats["collections"], stats["views"], stats["objects"]) == (1, 1, 1)
    for field in ["avgObjSize", "dataSize", "storageSize", "indexSize", "totalSize", "scaleFactor",
                  "fsUsedSize", "fsTotalSize"]:
        assert type(stats[field]) is float, (field, type(stats[field]))
    vfs = os.statvfs(server.dbpath)
    total = vfs.f_blocks * vfs.f_frsize
    assert stats["fsTotalSize"] == float(total)
    assert 0 < stats["fsUsedSize"] <= stats["fsTotalSize"]
    scaled = client.app.command("dbStats", scale=1024)
    assert scaled["fsTotalSize"] == total / 1024
    assert scaled["scaleFactor"] == 1024.0


def test_explain_and_server_status_name_the_real_host_and_port(client, server):
    client.app.items.insert_one({"x": 1})
    explained = client.app.command("explain", {"find": "items", "filter": {}})
    info = explained["serverInfo"]
    assert info["host"] == socket.gethostname()
    assert info["port"] == server.port and type(info["port"]) is int
    status = client.admin.command("serverStatus")
    assert status["host"] == f"{socket.gethostname()}:{server.port}"


@pytest.mark.parametrize("w,message", [
    (2, "cannot use 'w' > 1 when a host is not replicated"),
    ("dc1", "cannot use non-majority 'w' mode dc1 when a host is not a member of a replica set"),
])
def test_a_write_concern_a_standalone_cannot_meet_is_bad_value(client, w, message):
    coll = client.app.get_collection("items", write_concern=WriteConcern(w=w))
    with pytest.raises(OperationFailure) as e:
        coll.insert_one({"x": 1})
    assert (e.value.code, e.value.details["errmsg"]) == (2, message)
    assert client.app.items.count_documents({}) == 0
    client.app.get_collection("items", write_concern=WriteConcern(w="majority")).insert_one({"x": 1})
    client.app.get_collection("items", write_concern=WriteConcern(w=1, j=True)).insert_one({"x": 2})
    assert client.app.items.count_documents({}) == 2


def test_a_tailable_find_is_refused_as_on_a_collection_that_is_not_capped(client):
    client.app.items.insert_one({"x": 1})
    with pytest.raises(OperationFailure) as e:
        client.app.command("find", "items", tailable=True)
    assert e.value.code == 2
    assert e.value.details["errmsg"].endswith("tailable cursor requested on non capped collection")
    assert "ns=app.items" in e.value.details["errmsg"]
    with pytest.raises(OperationFailure) as e:
        client.app.command("find", "items", awaitData=True)
    assert (e.value.code, e.value.details["errmsg"]) == (
        9, "Cannot set 'awaitData' without also setting 'tailable'")
    # No collection, nothing to tail: an empty batch, as mongod answers.
    assert client.app.command("find", "missing", tailable=True)["cursor"]["firstBatch"] == []


def test_a_client_disconnect_is_not_a_framing_failure(server):
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        with server.client() as c:
            c.admin.command("ping")
    log = server.read_log()
    assert "message cannot be framed" not in log
    assert "reading from the socket failed" not in log


def test_counts_in_other_replies_are_int32_when_they_fit(client, server):
    """Issue 26 item 4's other replies: count's `n`, hello's and currentOp's `connectionId`,
    explain's executionStats counters, validate's counts, a capped collection's listed
    `size`/`max`, serverStatus' `mem`, `asserts` and `connections` counters, and compact's
    `bytesFreed` go through mongod's `appendNumber` (int32 when the value fits)."""
    db = client.types2
    db.c.insert_many([{"x": i} for i in range(5)])
    assert type(db.command("count", "c")["n"]) is int
    assert type(db.command("hello")["connectionId"]) is int
    stats = db.command("explain", {"find": "c", "filter": {"x": 3}},
                       verbosity="executionStats")["executionStats"]
    for field in ["nReturned", "executionTimeMillis", "totalKeysExamined", "totalDocsExamined"]:
        assert type(stats[field]) is int, field
    valid = db.command("validate", "c")
    for field in ["nInvalidDocuments", "nNonCompliantDocuments", "nrecords"]:
        assert type(valid[field]) is int, field
    assert all(type(v) is int for v in valid["keysPerIndex"].values())
    db.create_collection("capped", capped=True, size=4096, max=10)
    [entry] = db.command("listCollections", filter={"name": "capped"})["cursor"]["firstBatch"]
    assert type(entry["options"]["size"]) is int and type(entry["options"]["max"]) is int
    status = client.admin.command("serverStatus")
    assert type(status["mem"]["resident"]) is int and type(status["mem"]["virtual"]) is int
    assert type(status["asserts"]["user"]) is int and status["asserts"]["tripwire"] == 0
    for field in ["totalCreated", "rejected"]:
        assert type(status["connections"][field]) is int, field
    assert type(db.command("compact", "c")["bytesFreed"]) is int
    ops = client.admin.command("currentOp", True)["inprog"]
    with_ids = [op for op in ops if "connectionId" in op]
    assert with_ids and all(type(op["connectionId"]) is int for op in with_ids)
