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


def test_in_through_a_secondary_index_reads_each_leaf_once(coll):
    """500 values through an index: one cursor seeks range after range, so the result is
    exact in both directions and only the matching keys are examined."""
    coll.insert_many([{"_id": i, "v": i * 3} for i in range(20_000)])
    coll.create_index("v")
    values = [v * 3 for v in random.Random(3).sample(range(20_000), 500)] + [1, 2]
    wanted = sorted(v for v in values if v % 3 == 0)
    assert [d["v"] for d in coll.find({"v": {"$in": values}}).sort("v", 1)] == wanted
    assert [d["v"] for d in coll.find({"v": {"$in": values}}).sort("v", -1)] == wanted[::-1]
    stats = coll.database.command(
        "explain", {"find": coll.name, "filter": {"v": {"$in": values}}},
        verbosity="executionStats",
    )["executionStats"]
    assert stats["totalKeysExamined"] == len(wanted)
