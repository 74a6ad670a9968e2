"""A blocking sort past `internalQueryMaxBlockingSortMemoryUsageBytes` (set small here) spills
to temporary runs and merges them (mongod's external sort), as `allowDiskUse` allows and
mongod 7.0 allows by default; with `allowDiskUse: false` it fails with 292 as mongod's does.
Pipeline stages that do not spill here fail with 146 when disk use was allowed."""

import random

import pytest
from pymongo.errors import OperationFailure

LIMIT = 64 * 1024


@pytest.fixture
def small_sorts(db):
    admin = db.client.admin
    before = admin.command("getParameter", 1,
                           internalQueryMaxBlockingSortMemoryUsageBytes=1)
    admin.command("setParameter", 1, internalQueryMaxBlockingSortMemoryUsageBytes=LIMIT)
    yield db
    admin.command("setParameter", 1, internalQueryMaxBlockingSortMemoryUsageBytes=before[
        "internalQueryMaxBlockingSortMemoryUsageBytes"])


def load(db, n=4000):
    rng = random.Random(3)
    docs = [{"_id": i, "k": rng.randrange(1000), "pad": "p" * 150} for i in range(n)]
    rng.shuffle(docs)
    db.c.insert_many(docs)
    return docs


def test_find_sorts_past_the_limit_by_spilling(small_sorts):
    db = small_sorts
    docs = load(db)
    assert sum(len(d["pad"]) for d in docs) > 8 * LIMIT
    want = [d["_id"] for d in sorted(docs, key=lambda d: (d["k"], d["_id"]))]
    got = [d["_id"] for d in db.c.find({}, {"_id": 1}).sort([("k", 1), ("_id", 1)])]
    assert got == want
    desc = [d["k"] for d in db.c.find({"k": {"$gte": 100}}).sort("k", -1).batch_size(50)]
    assert desc == sorted((d["k"] for d in docs if d["k"] >= 100), reverse=True)
    top = [d["_id"] for d in db.c.find().sort([("k", 1), ("_id", 1)]).skip(10).limit(2500)]
    assert top == want[10:2510]
    # A pipeline's leading $sort runs as the find's sort, and spills the same way.
    agg = [d["_id"] for d in db.c.aggregate([{"$sort": {"k": 1, "_id": 1}},
                                             {"$project": {"_id": 1}}])]
    assert agg == want


def test_without_disk_use_the_limit_is_292(small_sorts):
    db = small_sorts
    load(db)
    with pytest.raises(OperationFailure) as e:
        list(db.c.find().sort("k", 1).allow_disk_use(False))
    assert e.value.code == 292
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate([{"$sort": {"k": 1}}], allowDiskUse=False))
    assert e.value.code == 292


def test_stages_that_do_not_spill_fail_loudly(small_sorts):
    db = small_sorts
    load(db)
    big_group = [{"$group": {"_id": "$_id", "pad": {"$first": "$pad"}}}]
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate(big_group))
    assert e.value.code == 146
    with pytest.raises(OperationFailure) as e:
        list(db.c.aggregate(big_group, allowDiskUse=False))
    assert e.value.code == 292
