"""`$in` on `_id` reads its ids by point lookups (issue 23 item 10): 2,000 ids out of 20,000
documents examine 2,000 keys, not the whole `_id` index, in either sort direction, and a
long `$in` on an unindexed field still matches exactly."""

import random


def test_in_on_id_reads_only_its_ids(coll):
    coll.insert_many([{"_id": i, "v": i % 1000} for i in range(20_000)])
    ids = random.Random(7).sample(range(20_000), 2_000) + [-1, "absent"]
    wanted = sorted(i for i in ids if isinstance(i, int) and i >= 0)
    assert [d["_id"] for d in coll.find({"_id": {"$in": ids}})] == wanted
    down = [d["_id"] for d in coll.find({"_id": {"$in": ids}}).sort("_id", -1)]
    assert down == wanted[::-1]
    stats = coll.database.command(
        "explain", {"find": coll.name, "filter": {"_id": {"$in": ids}}},
        verbosity="executionStats",
    )["executionStats"]
    assert stats["totalKeysExamined"] == len(ids)
    assert stats["totalDocsExamined"] == len(wanted)
    # A long list on a field without an index: the matcher's search agrees with equality.
    values = list(range(0, 1000, 7)) + [3.0, "7"]
    got = sorted(d["_id"] for d in coll.find({"v": {"$in": values}}))
    ints = {v for v in values if not isinstance(v, str)}
    assert got == [i for i in range(20_000) if i % 1000 in ints]
