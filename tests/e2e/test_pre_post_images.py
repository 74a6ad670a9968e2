"""Change streams' pre- and post-images (issue 24 item 9; `shale-db`'s `pre_images.rs`):
`changeStreamPreAndPostImages` on `create`/`collMod`, pre-images kept in
`config.system.preimages` in the write's own commit, `fullDocumentBeforeChange` and
`fullDocument: whenAvailable|required` answered from them, in transactions too."""

import pytest
from pymongo.errors import OperationFailure


NO_MATCHING_DOCUMENT = 47


def test_updates_replacements_and_deletes_carry_their_images(primary):
    with primary.client() as c:
        db = c.app
        coll = db.create_collection("items", changeStreamPreAndPostImages={"enabled": True})
        info = db.command("listCollections", filter={"name": "items"})["cursor"]["firstBatch"][0]
        assert info["options"]["changeStreamPreAndPostImages"] == {"enabled": True}
        coll.insert_one({"_id": 1, "a": {"b": [1, 2]}, "n": 0})
        with coll.watch(
            full_document="whenAvailable", full_document_before_change="required"
        ) as cs:
            coll.update_one({"_id": 1}, {"$set": {"a.b.1": 5, "m": 1}, "$inc": {"n": 1}})
            coll.replace_one({"_id": 1}, {"_id": 1, "r": True})
            coll.delete_one({"_id": 1})
            upd, rep, dele = cs.next(), cs.next(), cs.next()
        assert upd["operationType"] == "update"
        assert upd["fullDocumentBeforeChange"] == {"_id": 1, "a": {"b": [1, 2]}, "n": 0}
        assert upd["fullDocument"] == {"_id": 1, "a": {"b": [1, 5]}, "n": 1, "m": 1}
        assert rep["fullDocumentBeforeChange"] == upd["fullDocument"]
        assert rep["fullDocument"] == {"_id": 1, "r": True}
        assert dele["fullDocumentBeforeChange"] == {"_id": 1, "r": True}
        stored = list(c.config["system.preimages"].find())
        assert len(stored) == 3
        ids = [s["_id"] for s in stored]
        assert all(i["nsUUID"] == info["info"]["uuid"] and i["applyOpsIndex"] == 0 for i in ids)
        assert sorted(i["ts"] for i in ids) == [upd["clusterTime"], rep["clusterTime"], dele["clusterTime"]]


def test_a_transactions_images_are_kept_per_operation(primary):
    with primary.client() as c:
        coll = c.app.create_collection("acct", changeStreamPreAndPostImages={"enabled": True})
        coll.insert_many([{"_id": 1, "v": 1}, {"_id": 2, "v": 2}])
        with coll.watch(full_document_before_change="whenAvailable", full_document="required") as cs:
            with c.start_session() as s:
                s.start_transaction()
                coll.update_one({"_id": 1}, {"$inc": {"v": 10}}, session=s)
                coll.update_one({"_id": 2}, {"$inc": {"v": 20}}, session=s)
                s.commit_transaction()
            first, second = cs.next(), cs.next()
        assert (first["fullDocumentBeforeChange"], first["fullDocument"]) == (
            {"_id": 1, "v": 1},
            {"_id": 1, "v": 11},
        )
        assert (second["fullDocumentBeforeChange"], second["fullDocument"]) == (
            {"_id": 2, "v": 2},
            {"_id": 2, "v": 22},
        )
        indexes = sorted(p["_id"]["applyOpsIndex"] for p in c.config["system.preimages"].find())
        assert indexes == [0, 1]


def test_collmod_turns_them_on_and_off(primary):
    with primary.client() as c:
        db = c.app
        coll = db.plain
        coll.insert_one({"_id": 1, "x": 0})
        with coll.watch(full_document="whenAvailable", full_document_before_change="whenAvailable") as cs:
            coll.update_one({"_id": 1}, {"$set": {"x": 1}})
            ev = cs.next()
        assert ev["fullDocument"] is None and ev["fullDocumentBeforeChange"] is None
        db.command("collMod", "plain", changeStreamPreAndPostImages={"enabled": True})
        with coll.watch(full_document="required") as cs:
            coll.update_one({"_id": 1}, {"$set": {"x": 2}})
            assert cs.next()["fullDocument"] == {"_id": 1, "x": 2}
        db.command("collMod", "plain", changeStreamPreAndPostImages={"enabled": False})
        info = db.command("listCollections", filter={"name": "plain"})["cursor"]["firstBatch"][0]
        assert "changeStreamPreAndPostImages" not in info["options"]
        with coll.watch(full_document_before_change="required") as cs:
            coll.update_one({"_id": 1}, {"$set": {"x": 3}})
            with pytest.raises(OperationFailure) as e:
                cs.next()
            assert e.value.code == NO_MATCHING_DOCUMENT


def test_fast_updates_keep_the_pre_image(primary):
    with primary.client() as c:
        c.admin.command("setParameter", 1, fastUpdates=True)
        coll = c.app.create_collection("fast", changeStreamPreAndPostImages={"enabled": True})
        coll.insert_one({"_id": 1, "n": 1})
        with coll.watch(full_document="required", full_document_before_change="required") as cs:
            coll.update_one({"_id": 1}, {"$inc": {"n": 1}})
            ev = cs.next()
        assert ev["fullDocumentBeforeChange"] == {"_id": 1, "n": 1}
        assert ev["fullDocument"] == {"_id": 1, "n": 2}


def test_bad_options_and_the_store_are_refused(primary):
    with primary.client() as c:
        db = c.app
        for bad, code in [
            (True, 14),
            ({"enabled": 1}, 14),
            ({}, 40414),
            ({"enabled": True, "x": 1}, 40415),
        ]:
            with pytest.raises(OperationFailure) as e:
                db.create_collection("bad", changeStreamPreAndPostImages=bad)
            assert e.value.code == code, bad
        with pytest.raises(OperationFailure) as e:
            c.admin.create_collection("x", changeStreamPreAndPostImages={"enabled": True})
        assert e.value.code == 72
        db.create_collection("on", changeStreamPreAndPostImages={"enabled": True})
        with pytest.raises(OperationFailure) as e:
            c.config.drop_collection("system.preimages")
        assert e.value.code == 20
        with c.start_session() as s:
            s.start_transaction()
            with pytest.raises(OperationFailure) as e:
                db.create_collection("intxn", changeStreamPreAndPostImages={"enabled": True}, session=s)
            assert e.value.code == 263


def test_large_events_split_into_fragments_and_resume_inside_them(primary):
    with primary.client() as c:
        coll = c.app.create_collection("big", changeStreamPreAndPostImages={"enabled": True})
        coll.insert_one({"_id": 1, "v": "q" * (9 << 20)})
        split = [{"$changeStreamSplitLargeEvent": {}}]
        with coll.watch(full_document_before_change="required", max_await_time_ms=500) as cs:
            start = cs.resume_token
            coll.update_one({"_id": 1}, {"$set": {"v": "z" * (9 << 20)}})
            coll.insert_one({"_id": 2})
            # Without the stage, the 18 MiB event is too large.
            with pytest.raises(OperationFailure) as e:
                cs.next()
            assert e.value.code == 10334
        with coll.watch(split, full_document_before_change="required", resume_after=start) as cs:
            first, second, after = cs.next(), cs.next(), cs.next()
        assert first["splitEvent"] == {"fragment": 1, "of": 2}
        assert second["splitEvent"] == {"fragment": 2, "of": 2}
        assert first["operationType"] == "update"
        merged = {**first, **second}
        assert merged["fullDocumentBeforeChange"]["v"][0] == "q"
        assert merged["updateDescription"]["updatedFields"]["v"][0] == "z"
        assert first["_id"] != second["_id"]
        assert after["operationType"] == "insert"
        # Resuming after the first fragment returns the second, then what follows.
        with coll.watch(split, full_document_before_change="required", resume_after=first["_id"]) as cs:
            again, nxt = cs.next(), cs.next()
        assert again["_id"] == second["_id"] and again["splitEvent"]["fragment"] == 2
        assert nxt["documentKey"] == {"_id": 2}
        for bad, code in [
            ([{"$changeStreamSplitLargeEvent": {}}, {"$match": {}}], 7182802),
            ([{"$changeStreamSplitLargeEvent": {"x": 1}}], 7182800),
        ]:
            with pytest.raises(OperationFailure) as e:
                coll.watch(bad)
            assert e.value.code == code
