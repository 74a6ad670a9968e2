"""`dataSize` and `compact` in mongod's reply shapes; `dbStats` complete."""

import pytest
from bson import encode
from pymongo.errors import OperationFailure


def test_data_size_counts_the_collections_documents(client):
    coll = client.dsdb.c
    docs = [{"_id": i, "s": "x" * i} for i in range(50)]
    coll.insert_many(docs)
    total = sum(len(encode(d)) for d in docs)
    for estimate in [False, True]:
        r = client.dsdb.command("dataSize", "dsdb.c", estimate=estimate)
        assert (r["size"], r["numObjects"]) == (total, 50)
        assert isinstance(r["millis"], int)
    capped = client.dsdb.command("dataSize", "dsdb.c", maxObjects=10)
    assert capped["numObjects"] == 11 and capped["maxReached"] is True
    none = client.dsdb.command("dataSize", "dsdb.nothing")
    assert (none["size"], none["numObjects"]) == (0, 0)
    with pytest.raises(OperationFailure) as e:
        client.dsdb.command("dataSize", "dsdb.c", keyPattern={"_id": 1}, min={"_id": 1}, max={"_id": 5})
    assert e.value.code == 238


def test_compact_answers_mongods_reply(client):
    client.dsdb.k.insert_one({"_id": 1})
    assert client.dsdb.command("compact", "k") == {"bytesFreed": 0, "ok": 1.0}
    assert client.dsdb.command("compact", "k", force=True, dryRun=True)["estimatedBytesFreed"] == 0
    with pytest.raises(OperationFailure) as e:
        client.dsdb.command("compact", "missing")
    assert e.value.code == 26
    with pytest.raises(OperationFailure) as e:
        client.dsdb.command("compact", "k", bogus=1)
    assert e.value.code == 40415


def test_db_stats_has_mongods_fields(client):
    client.dsdb.s.insert_one({"_id": 1})
    stats = client.dsdb.command("dbStats")
    for field in [
        "db", "collections", "views", "objects", "avgObjSize", "dataSize", "storageSize",
        "indexes", "indexSize", "totalSize", "scaleFactor", "fsUsedSize", "fsTotalSize",
    ]:
        assert field in stats, field


def test_db_stats_free_storage_figures_on_request(client):
    client.dsdb.f.insert_one({"_id": 1})
    assert "freeStorageSize" not in client.dsdb.command("dbStats")
    stats = client.dsdb.command("dbStats", freeStorage=1)
    for field in ["freeStorageSize", "indexFreeStorageSize", "totalFreeStorageSize"]:
        assert stats[field] == 0.0, field
