"""The `$collStats` stage (mongosh's db.coll.stats(), totalSize(), latencyStats()): storage
figures at a scale, the count, latency by reads/writes/commands, later stages over its one
document, and mongod's errors for what it does not serve."""

import pytest
from pymongo.errors import OperationFailure


def test_storage_stats_count_and_latency(coll):
    coll.insert_many([{"_id": i, "pad": "x" * 100} for i in range(50)])
    coll.find_one({"_id": 3})
    (doc,) = coll.aggregate(
        [{"$collStats": {"storageStats": {"scale": 1024}, "count": {}, "latencyStats": {}}}]
    )
    assert doc["ns"] == coll.full_name
    assert doc["count"] == 50
    storage = doc["storageStats"]
    assert storage["count"] == 50 and storage["scaleFactor"] == 1024
    assert storage["nindexes"] == 1 and "_id_" in storage["indexSizes"]
    plain = coll.database.command("collStats", coll.name, scale=1024)
    assert storage["size"] == plain["size"]
    latency = doc["latencyStats"]
    assert latency["writes"]["ops"] >= 1 and latency["reads"]["ops"] >= 1
    assert all(latency[k]["latency"] >= 0 for k in ("reads", "writes", "commands"))


def test_later_stages_run_over_its_document(coll):
    coll.insert_many([{"_id": i} for i in range(7)])
    out = list(coll.aggregate([{"$collStats": {"count": {}}}, {"$project": {"_id": 0, "count": 1}}]))
    assert out == [{"count": 7}]


@pytest.mark.parametrize(
    "pipeline, code",
    [
        ([{"$match": {}}, {"$collStats": {}}], 40602),
        ([{"$collStats": {"nope": {}}}], 40415),
        ([{"$collStats": {"queryExecStats": {}}}], 238),
        ([{"$collStats": {"storageStats": {"scale": 0}}}], 2),
        ([{"$collStats": 1}], 9),
    ],
)
def test_refusals(coll, pipeline, code):
    coll.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate(pipeline))
    assert e.value.code == code, e.value.details


def test_a_missing_collection_has_no_storage_stats(db):
    with pytest.raises(OperationFailure) as e:
        list(db.nothing_here.aggregate([{"$collStats": {"storageStats": {}}}]))
    assert e.value.code == 26
