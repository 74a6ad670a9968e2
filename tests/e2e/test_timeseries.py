"""Time series collections (`create` with `timeseries`, MongoDB 5.0, as mongod 7.0 has them):
the option checks and codes, measurements bucketed into `system.buckets.<name>` and read back
through find/aggregate/count/distinct as a naive evaluation says, deletes of any query and
metaField-only updates counting measurements, index commands in user form, listings as
mongod lists them, a dump and restore of the buckets as mongodump/mongorestore send it (mongod
7.0's compressed buckets included), and whole-bucket TTL expiry (TTL monitor every second)."""

import datetime
import random
import time

import pytest
from bson import Binary, ObjectId
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

from conftest import Server

T0 = datetime.datetime(2026, 11, 1, tzinfo=datetime.timezone.utc)


def code(db, name="x", **options):
    with pytest.raises(OperationFailure) as e:
        db.command("create", name, **options)
    return e.value.code


def measurements(n, seed=7):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        d = {"_id": i, "t": T0 + datetime.timedelta(seconds=rng.randrange(0, 3 * 86400)),
             "m": {"sensor": i % 4, "site": "a" if i % 2 else "b"}, "v": rng.random()}
        if i % 5 == 0:
            d["extra"] = i
        out.append(d)
    return out


def naive(docs, pred):
    return sorted((d["_id"] for d in docs if pred(d)))


def ids(cursor):
    return sorted(d["_id"] for d in cursor)


def test_create_checks_options_as_mongod(db):
    assert code(db, timeseries="") == 14
    assert code(db, timeseries={"timeField": 100}) == 14
    assert code(db, timeseries={"timeField": "t", "bad": 1}) == 40415
    assert code(db, timeseries={"metaField": "m"}) == 40414
    assert code(db, timeseries={"timeField": "a.b"}) == 72
    assert code(db, timeseries={"timeField": "t", "metaField": "_id"}) == 72
    assert code(db, timeseries={"timeField": "t", "metaField": "t"}) == 72
    assert code(db, timeseries={"timeField": "t", "bucketMaxSpanSeconds": 10}) == 72
    assert code(db, timeseries={"timeField": "t", "granularity": "minutes",
                                "bucketMaxSpanSeconds": 3600}) == 72
    assert code(db, timeseries={"timeField": "t", "bucketMaxSpanSeconds": 50,
                                "bucketRoundingSeconds": 100}) == 72
    assert code(db, timeseries={"timeField": "t"}, capped=True, size=4096) == 72
    assert code(db, timeseries={"timeField": "t"}, validator={"a": 1}) == 72
    assert code(db, timeseries={"timeField": "t"}, clusteredIndex=True) == 72
    assert code(db, timeseries={"timeField": "t"}, encryptedFields={}) == 6346401
    assert code(db, timeseries={"timeField": "t"}, expireAfterSeconds=-1) == 72
    assert code(db, timeseries={"timeField": "t"}, expireAfterSeconds="10") == 14
    assert "x" not in db.list_collection_names()
    db.command("create", "x", timeseries={"timeField": "t"})
    assert code(db, timeseries={"timeField": "t"}) == 48
    db.create_collection("plain")
    assert code(db, "plain", timeseries={"timeField": "t"}) == 48


def test_listings_as_mongod(db):
    db.command("create", "ts", timeseries={"timeField": "t", "metaField": "m",
                                           "granularity": "minutes"}, expireAfterSeconds=3600)
    listed = {c["name"]: c for c in db.list_collections()}
    assert listed["ts"]["type"] == "timeseries"
    assert listed["ts"]["options"] == {
        "expireAfterSeconds": 3600,
        "timeseries": {"timeField": "t", "metaField": "m", "granularity": "minutes",
                       "bucketMaxSpanSeconds": 86400}}
    assert listed["ts"]["info"] == {"readOnly": False}
    assert "idIndex" not in listed["ts"]
    assert listed["system.buckets.ts"]["type"] == "collection"
    assert list(db.list_collections(filter={"type": "timeseries"}, nameOnly=True)) == [
        {"name": "ts", "type": "timeseries"}]
    indexes = list(db.ts.list_indexes())
    assert [(i["name"], dict(i["key"])) for i in indexes] == [("m_1_t_1", {"m": 1, "t": 1})]
    custom = {"timeField": "t", "bucketMaxSpanSeconds": 4000, "bucketRoundingSeconds": 4000}
    db.command("create", "custom", timeseries=custom)
    opts = next(db.list_collections(filter={"name": "custom"}))["options"]
    assert opts == {"timeseries": custom}
    assert list(db.custom.list_indexes()) == []


def test_inserts_read_back_as_a_naive_evaluation(db):
    db.command("create", "ts", timeseries={"timeField": "t", "metaField": "m"})
    docs = measurements(3000)
    db.ts.insert_many(docs[:1500])
    for d in docs[1500:1600]:
        db.ts.insert_one(d)
    db.ts.insert_many(docs[1600:], ordered=False)
    assert db.ts.count_documents({}) == 3000
    assert ids(db.ts.find()) == list(range(3000))
    one = db.ts.find_one({"_id": 5})
    assert list(one) == ["t", "m", "_id", "v", "extra"]
    assert one["m"] == {"sensor": 1, "site": "a"}
    q = {"m.sensor": 2, "v": {"$gt": 0.5}}
    assert ids(db.ts.find(q)) == naive(docs, lambda d: d["m"]["sensor"] == 2 and d["v"] > 0.5)
    cut = T0 + datetime.timedelta(days=1)
    assert db.ts.count_documents({"t": {"$lt": cut}}) == len(
        naive(docs, lambda d: d["t"].replace(tzinfo=datetime.timezone.utc) < cut))
    groups = {g["_id"]: g["n"] for g in db.ts.aggregate(
        [{"$group": {"_id": "$m.sensor", "n": {"$sum": 1}}}])}
    assert groups == {s: 750 for s in range(4)}
    assert sorted(db.ts.distinct("m.site")) == ["a", "b"]
    newest = list(db.ts.find({}, {"_id": 1}).sort("t", -1).limit(1))[0]["_id"]
    assert newest == max(docs, key=lambda d: d["t"])["_id"]
    # Buckets: mongod's version 1 format, within its limits.
    for b in db["system.buckets.ts"].find():
        assert b["control"]["version"] == 1
        assert len(b["data"]["t"]) <= 1000
        start = b["control"]["min"]["t"].replace(tzinfo=datetime.timezone.utc)
        assert b["_id"].generation_time == start
        assert b["control"]["max"]["t"].replace(tzinfo=datetime.timezone.utc) < start + \
            datetime.timedelta(hours=1)


def test_duplicate_ids_and_bad_times(db):
    db.command("create", "ts", timeseries={"timeField": "t"})
    db.ts.insert_many([{"_id": 1, "t": T0}, {"_id": 1, "t": T0}])
    assert db.ts.count_documents({"_id": 1}) == 2
    with pytest.raises(BulkWriteError) as e:
        db.ts.insert_many([{"t": 1}, {"t": T0}, {"x": 1}], ordered=False)
    assert [w["index"] for w in e.value.details["writeErrors"]] == [0, 2]
    assert e.value.details["writeErrors"][0]["code"] == 2
    assert e.value.details["nInserted"] == 1
    with pytest.raises(WriteError) as e:
        db.ts.insert_one({"t": "not a date"})
    assert e.value.code == 2


def test_deletes_and_meta_updates(db):
    db.command("create", "ts", timeseries={"timeField": "t", "metaField": "m"})
    docs = measurements(1200)
    db.ts.insert_many(docs)
    r = db.ts.delete_many({"v": {"$lt": 0.25}})
    gone = naive(docs, lambda d: d["v"] < 0.25)
    assert r.deleted_count == len(gone)
    left = sorted(set(range(1200)) - set(gone))
    assert ids(db.ts.find()) == left
    assert db.ts.delete_one({"m.sensor": 3}).deleted_count == 1
    assert db.ts.count_documents({}) == len(left) - 1
    # A time bound selects buckets by control.min/max before their measurements are matched.
    cut = T0 + datetime.timedelta(hours=20)
    before = db.ts.count_documents({})
    doomed = db.ts.count_documents({"t": {"$lt": cut}, "m.site": "b"})
    assert 0 < doomed < before
    assert db.ts.delete_many({"t": {"$lt": cut}, "m.site": "b"}).deleted_count == doomed
    assert db.ts.count_documents({"t": {"$lt": cut}, "m.site": "b"}) == 0
    assert db.ts.count_documents({}) == before - doomed
    site_a = db.ts.count_documents({"m.site": "a"})
    r = db.ts.update_many({"m.site": "a"}, {"$set": {"m.site": "c"}})
    assert (r.matched_count, r.modified_count) == (site_a, site_a)
    assert db.ts.count_documents({"m.site": "c"}) == site_a
    for bad in ({"v": 1}, {"$expr": {"$eq": ["$m", 1]}}):
        with pytest.raises(WriteError) as e:
            db.ts.update_many(bad, {"$set": {"m.x": 1}})
        assert e.value.code == 72
    for bad in ({"$set": {"v": 1}}, {"$inc": {"extra": 1}}):
        with pytest.raises(WriteError) as e:
            db.ts.update_many({}, bad)
        assert e.value.code == 72
    with pytest.raises(WriteError) as e:
        db.ts.update_one({"m.site": "c"}, {"$set": {"m.x": 1}})
    assert e.value.code == 72
    with pytest.raises(WriteError) as e:
        db.ts.update_many({}, {"$set": {"m.x": 1}}, upsert=True)
    assert e.value.code == 72
    with pytest.raises(OperationFailure) as e:
        db.ts.find_one_and_update({}, {"$set": {"m.x": 1}})
    assert e.value.code == 166
    db.command("create", "nometa", timeseries={"timeField": "t"})
    db.nometa.insert_one({"t": T0})
    with pytest.raises(WriteError) as e:
        db.nometa.update_many({}, {"$set": {"a": 1}})
    assert e.value.code == 72


def test_index_commands_in_user_form(db):
    db.command("create", "ts", timeseries={"timeField": "t", "metaField": "m"})
    db.ts.insert_many(measurements(300))
    assert db.ts.create_index([("m.sensor", 1), ("t", -1)]) == "m.sensor_1_t_-1"
    assert db.ts.create_index([("v", 1)]) == "v_1"
    names = {i["name"]: dict(i["key"]) for i in db.ts.list_indexes()}
    assert names == {"m_1_t_1": {"m": 1, "t": 1}, "m.sensor_1_t_-1": {"m.sensor": 1, "t": -1},
                     "v_1": {"v": 1}}
    buckets = {i["name"]: dict(i["key"]) for i in db["system.buckets.ts"].list_indexes()}
    assert buckets["m.sensor_1_t_-1"] == {"meta.sensor": 1, "control.max.t": -1,
                                          "control.min.t": -1}
    assert ids(db.ts.find({"m.sensor": 1}).hint("m.sensor_1_t_-1")) == ids(
        db.ts.find({"m.sensor": 1}))
    for spec, kw, want in (([("m", 1)], {"unique": True}, 72), ([("v", "text")], {}, 72),
                           ([("v", 1)], {"sparse": True}, 72), ([("v", "hashed")], {}, 67)):
        with pytest.raises(OperationFailure) as e:
            db.ts.create_index(spec, **kw)
        assert e.value.code == want, spec
    db.ts.drop_index([("v", 1)])
    db.ts.drop_index("m.sensor_1_t_-1")
    assert [i["name"] for i in db.ts.list_indexes()] == ["m_1_t_1"]


def test_views_rename_transactions_and_drop(db):
    db.command("create", "ts", timeseries={"timeField": "t", "metaField": "m"})
    db.ts.insert_many(measurements(50))
    db.command("create", "v", viewOn="ts", pipeline=[{"$match": {"m.sensor": 0}}])
    assert db.v.count_documents({}) == 13
    with pytest.raises(OperationFailure) as e:
        db.command("create", "vb", viewOn="system.buckets.ts", pipeline=[])
    assert e.value.code == 73
    with pytest.raises(OperationFailure) as e:
        db.ts.rename("other")
    assert e.value.code == 166
    with db.client.start_session() as s:
        s.start_transaction()
        with pytest.raises(OperationFailure) as e:
            db.ts.insert_one({"t": T0}, session=s)
        assert e.value.code == 263
        s.abort_transaction()
    db.ts.drop()
    assert set(db.list_collection_names()) == {"v"}
    # Dropped and made again: nothing of the old one's buckets or counters is left.
    db.command("create", "ts", timeseries={"timeField": "t"})
    db.ts.insert_one({"t": T0})
    assert db.command("collStats", "ts")["timeseries"]["numMeasurementsCommitted"] == 1


# A column of mongod's jstest bucket: double 0.0, then +1 (scale ×1); and that column with
# the jstest's one-character corruption (its literal becomes a subnormal the run cannot hold).
A_COLUMN = "01000000000000000000902e0000000000000000"
A_COLUMN_CORRUPT = "01000000000000000100902e0000000000000000"


def compressed_bucket(a_column, _id=ObjectId("65a6eb806ffc9fa4280ecac4"), meta=0):
    def column(hex_bytes):
        return Binary(bytes.fromhex(hex_bytes), 7)

    return {
        "_id": _id,
        "control": {"version": 2,
                    "min": {"t": datetime.datetime(2024, 1, 16, 20, 48)},
                    "max": {"t": datetime.datetime(2024, 1, 16, 20, 48, 39, 448000)},
                    "count": 2},
        "meta": meta,
        "data": {"t": column("0900188608148d010000800e0000000000000000"),
                 "a": column(a_column),
                 "_id": column("070065a6eba7e6d2e848e08c3750802e0000000000000000")},
    }


def test_dump_and_restore_as_the_tools_send_it(db):
    # mongodump reads listCollections and the buckets; mongorestore creates the collection
    # with the dumped options and inserts the buckets as they were.
    src = db.client["tsdump"]
    src.command("create", "ts", timeseries={"timeField": "t", "metaField": "m"})
    docs = measurements(700)
    src.ts.insert_many(docs)
    info = next(src.list_collections(filter={"name": "ts"}))
    buckets = list(src["system.buckets.ts"].find())
    dst = db.client["tsrestore"]
    dst.command("create", "ts", **info["options"])
    dst["system.buckets.ts"].insert_many(buckets)
    assert ids(dst.ts.find()) == list(range(700))
    assert dst.ts.find_one({"_id": 3}) == src.ts.find_one({"_id": 3})
    # mongod 7.0 compresses closed buckets (version 2, BSONColumn data), so a dump of a real
    # mongod holds them: this one is mongod's own, from its jstest
    # timeseries_insert_decompression_failure.js (meta 0, two measurements).
    time = datetime.datetime(2024, 1, 16, 20, 48, 39, 448000)
    dst["system.buckets.ts"].insert_one(compressed_bucket(A_COLUMN))
    got = list(dst.ts.find({"m": 0}))
    assert got == [
        {"t": time, "m": 0, "a": 0.0, "_id": ObjectId("65a6eba7e6d2e848e08c3750")},
        {"t": time, "m": 0, "a": 1.0, "_id": ObjectId("65a6eba7e6d2e848e08c3751")},
    ]
    assert [list(d) for d in got] == [["t", "m", "a", "_id"]] * 2
    assert dst.ts.count_documents({"m": 0, "a": {"$gt": 0.5}}) == 1
    # A delete rewrites the kept measurement as an uncompressed (version 1) bucket.
    assert dst.ts.delete_one({"m": 0, "a": 1.0}).deleted_count == 1
    assert list(dst.ts.find({"m": 0}, {"_id": 0, "a": 1})) == [{"a": 0.0}]
    assert dst["system.buckets.ts"].find_one({"meta": 0})["control"]["version"] == 1
    # The same bucket with the jstest's corruption of one column is refused, naming it.
    dst["system.buckets.ts"].insert_one(
        compressed_bucket(A_COLUMN_CORRUPT, _id=ObjectId("65a6eb806ffc9fa4280ecac5"), meta=1))
    with pytest.raises(OperationFailure) as e:
        list(dst.ts.find({"m": 1}))
    assert e.value.code == 2
    assert "column 'a': invalid BSONColumn at byte 10" in str(e.value)
    # A bucket version not known here is refused, not misread.
    dst["system.buckets.ts"].insert_one({"_id": ObjectId(), "control": {"version": 4},
                                         "meta": 2, "data": {}})
    with pytest.raises(OperationFailure) as e:
        list(dst.ts.find({"m": 2}))
    assert e.value.code == 115
    db.client.drop_database("tsdump")
    db.client.drop_database("tsrestore")


def test_ttl_expires_whole_buckets(tmp_path):
    server = Server(tmp_path / "data", args=["--setParameter", "ttlMonitorSleepSecs=1"])
    try:
        db = server.client()["ttl"]
        db.command("create", "ts", timeseries={"timeField": "t", "granularity": "seconds"},
                   expireAfterSeconds=60)
        now = datetime.datetime.now(datetime.timezone.utc)
        old = now - datetime.timedelta(hours=3)
        db.ts.insert_many([{"t": old, "k": "old"}, {"t": now, "k": "new"}])
        deadline = time.time() + 20
        while time.time() < deadline and db.ts.count_documents({"k": "old"}):
            time.sleep(0.2)
        assert [d["k"] for d in db.ts.find()] == ["new"]
    finally:
        server.stop()


def test_stats_validate_and_coll_mod(db):
    db.command("create", "ts", timeseries={"timeField": "t", "metaField": "m"})
    db.ts.insert_many(measurements(2500))
    stats = db.command("collStats", "ts")
    assert stats["ns"] == f"{db.name}.ts"
    assert "count" not in stats and "avgObjSize" not in stats
    ts = stats["timeseries"]
    buckets = db["system.buckets.ts"].count_documents({})
    assert ts["bucketsNs"] == f"{db.name}.system.buckets.ts"
    assert ts["bucketCount"] == buckets
    assert ts["numMeasurementsCommitted"] == 2500
    assert ts["numBucketInserts"] == buckets
    assert ts["numBucketsOpenedDueToMetadata"] == 4
    assert ts["numBucketsClosedDueToTimeForward"] + ts["numBucketsClosedDueToTimeBackward"] > 0
    stage = next(db.ts.aggregate([{"$collStats": {"storageStats": {}}}]))
    assert stage["storageStats"]["timeseries"]["bucketCount"] == buckets
    assert db.command("validate", "ts")["valid"] is True
    # collMod: TTL on and off, granularity only coarser.
    db.command("collMod", "ts", expireAfterSeconds=600)
    opts = next(db.list_collections(filter={"name": "ts"}))["options"]
    assert opts["expireAfterSeconds"] == 600
    db.command("collMod", "ts", expireAfterSeconds="off")
    opts = next(db.list_collections(filter={"name": "ts"}))["options"]
    assert "expireAfterSeconds" not in opts
    db.command("collMod", "ts", timeseries={"granularity": "hours"})
    opts = next(db.list_collections(filter={"name": "ts"}))["options"]
    assert opts["timeseries"]["granularity"] == "hours"
    assert opts["timeseries"]["bucketMaxSpanSeconds"] == 2592000
    assert db.ts.count_documents({}) == 2500
    for bad, want in (({"timeseries": {"granularity": "seconds"}}, 72),
                      ({"expireAfterSeconds": "10"}, 72), ({"expireAfterSeconds": -1}, 72),
                      ({"validator": {"a": 1}}, 72)):
        with pytest.raises(OperationFailure) as e:
            db.command("collMod", "ts", **bad)
        assert e.value.code == want, bad


def test_find_options_an_aggregate_lacks(db):
    db.command("create", "ts", timeseries={"timeField": "t"})
    db.ts.insert_one({"t": T0})
    for option in ({"min": {"t": 1}}, {"returnKey": True}, {"tailable": True},
                   {"noCursorTimeout": True}, {"sort": {"$natural": 1}},
                   {"singleBatch": True}):
        with pytest.raises(OperationFailure) as e:
            db.command("find", "ts", **option)
        assert e.value.code == 168, option
    assert len(db.command("find", "ts", singleBatch=True, limit=1)["cursor"]["firstBatch"]) == 1


def test_a_retried_insert_runs_once(db):
    # A retryable write (lsid + txnNumber) sent twice, as a driver retries after a network
    # error: the second answer comes from the record, nothing is inserted again.
    db.command("create", "ts", timeseries={"timeField": "t"})
    with db.client.start_session() as s:
        cmd = {"insert": "ts", "documents": [{"t": T0, "k": 1}, {"t": T0, "k": 2}],
               "lsid": s.session_id, "txnNumber": 7}
        first = db.command(cmd)
        again = db.command(cmd)
    assert first["n"] == again["n"] == 2
    assert again.get("retriedStmtIds") == [0, 1]
    assert db.ts.count_documents({}) == 2


def test_a_retried_delete_one_runs_once(db):
    db.command("create", "ts", timeseries={"timeField": "t"})
    db.ts.insert_many([{"t": T0, "k": i} for i in range(3)])
    with db.client.start_session() as s:
        cmd = {"delete": "ts", "deletes": [{"q": {}, "limit": 1}],
               "lsid": s.session_id, "txnNumber": 1003}
        assert db.command(cmd)["n"] == 1
        again = db.command(cmd)
        assert again["n"] == 1 and again.get("retriedStmtIds") == [0]
        upd = {"update": "ts", "updates": [{"q": {}, "u": {"$set": {"k": 1}}, "multi": True}],
               "lsid": s.session_id, "txnNumber": 1004}
        assert db.command(upd)["writeErrors"][0]["code"] == 72
    assert db.ts.count_documents({}) == 2


def test_meta_and_time_filters_select_buckets_through_their_index(db):
    db.command("create", "ts", timeseries={"timeField": "t", "metaField": "m"})
    docs = measurements(2000)
    db.ts.insert_many(docs)
    lo, hi = T0 + datetime.timedelta(hours=5), T0 + datetime.timedelta(hours=30)
    q = {"m.sensor": 1, "t": {"$gte": lo, "$lt": hi}}

    def want(d):
        t = d["t"].replace(tzinfo=datetime.timezone.utc)
        return d["m"]["sensor"] == 1 and lo <= t < hi
    assert ids(db.ts.find(q)) == naive(docs, want)
    assert ids(db.ts.find({"t": docs[9]["t"]})) == naive(docs, lambda d: d["t"] == docs[9]["t"])
    # The bucket filter reaches the buckets' meta index: only those buckets are read.
    db.command("profile", 2)
    assert len(list(db.ts.find({"m": {"sensor": 2, "site": "b"}}))) == 500
    db.command("profile", 0)
    entry = db["system.profile"].find_one({"ns": f"{db.name}.ts", "op": "query"})
    own = db["system.buckets.ts"].count_documents({"meta": {"sensor": 2, "site": "b"}})
    assert entry["docsExamined"] == own < db["system.buckets.ts"].count_documents({})
