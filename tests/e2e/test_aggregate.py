"""The `aggregate` command through pymongo against the real binary: $match, $project,
$addFields, $set, $unset, $group with the accumulators $sum $avg $min $max $first $last
$push $addToSet $count, $sort, $limit, $skip, $unwind (with includeArrayIndex and
preserveNullAndEmptyArrays), $count, $lookup (equality and pipeline forms), $replaceRoot,
$replaceWith, $sortByCount, $facet, results spread over batched cursors, and MongoDB 7.0's
codes for a malformed pipeline (40323, 40324, 15955)."""

import pytest
from bson import Int64
from pymongo.errors import OperationFailure
from test_indexes import uses_index

SALES = [
    {"_id": 1, "item": "abc", "price": 10, "qty": 2, "tags": ["a", "b"], "store": "N"},
    {"_id": 2, "item": "jkl", "price": 20, "qty": 1, "tags": ["b"], "store": "S"},
    {"_id": 3, "item": "xyz", "price": 5, "qty": 10, "tags": [], "store": "N"},
    {"_id": 4, "item": "xyz", "price": 5, "qty": 20, "tags": ["c", "a"], "store": "S"},
    {"_id": 5, "item": "abc", "price": 10, "qty": 10, "store": "N"},
]


@pytest.fixture
def sales(coll):
    coll.insert_many(SALES)
    return coll


def run(coll, pipeline, **kwargs):
    return list(coll.aggregate(pipeline, **kwargs))


def test_empty_pipeline_returns_every_document(sales):
    assert sorted(run(sales, []), key=lambda d: d["_id"]) == SALES


def test_match_and_project(sales):
    got = run(sales, [
        {"$match": {"store": "N", "qty": {"$gte": 5}}},
        {"$project": {"item": 1, "total": {"$multiply": ["$price", "$qty"]}}},
        {"$sort": {"_id": 1}},
    ])
    assert got == [{"_id": 3, "item": "xyz", "total": 50}, {"_id": 5, "item": "abc", "total": 100}]


def test_project_exclusion_and_id_removal(sales):
    got = run(sales, [{"$match": {"_id": 2}}, {"$project": {"tags": 0, "store": 0}}])
    assert got == [{"_id": 2, "item": "jkl", "price": 20, "qty": 1}]
    got = run(sales, [{"$match": {"_id": 2}}, {"$project": {"_id": 0, "item": 1}}])
    assert got == [{"item": "jkl"}]


def test_add_fields_set_and_unset(sales):
    got = run(sales, [
        {"$match": {"_id": 1}},
        {"$addFields": {"total": {"$multiply": ["$price", "$qty"]}, "meta.src": "x"}},
        {"$set": {"double": {"$add": ["$total", "$total"]}}},
        {"$unset": ["tags", "store"]},
    ])
    assert got == [{"_id": 1, "item": "abc", "price": 10, "qty": 2, "total": 20,
                    "meta": {"src": "x"}, "double": 40}]


def test_group_accumulators(sales):
    got = run(sales, [
        {"$sort": {"_id": 1}},
        {"$group": {
            "_id": "$item",
            "sum": {"$sum": "$qty"},
            "avg": {"$avg": "$price"},
            "min": {"$min": "$qty"},
            "max": {"$max": "$qty"},
            "first": {"$first": "$_id"},
            "last": {"$last": "$_id"},
            "pushed": {"$push": "$qty"},
            "stores": {"$addToSet": "$store"},
            "count": {"$count": {}},
            "docs": {"$sum": 1},
        }},
        {"$sort": {"_id": 1}},
    ])
    for g in got:
        g["stores"] = sorted(g["stores"])
    assert got == [
        {"_id": "abc", "sum": 12, "avg": 10.0, "min": 2, "max": 10, "first": 1, "last": 5,
         "pushed": [2, 10], "stores": ["N"], "count": 2, "docs": 2},
        {"_id": "jkl", "sum": 1, "avg": 20.0, "min": 1, "max": 1, "first": 2, "last": 2,
         "pushed": [1], "stores": ["S"], "count": 1, "docs": 1},
        {"_id": "xyz", "sum": 30, "avg": 5.0, "min": 10, "max": 20, "first": 3, "last": 4,
         "pushed": [10, 20], "stores": ["N", "S"], "count": 2, "docs": 2},
    ]


def test_group_all_with_expressions(sales):
    got = run(sales, [{"$group": {"_id": None,
                                  "revenue": {"$sum": {"$multiply": ["$price", "$qty"]}},
                                  "avgQty": {"$avg": "$qty"}}}])
    assert got == [{"_id": None, "revenue": 290, "avgQty": 8.6}]


def test_group_by_compound_key_and_missing_as_null(coll):
    coll.insert_many([{"a": 1, "b": 1}, {"a": 1, "b": 1}, {"a": 1}, {"b": 2}, {"a": 1.0, "b": 1}])
    got = run(coll, [{"$group": {"_id": {"a": "$a", "b": "$b"}, "n": {"$sum": 1}}},
                     {"$sort": {"n": -1, "_id.b": 1}}])
    assert [g["n"] for g in got] == [3, 1, 1]
    assert got[0]["_id"] == {"a": 1, "b": 1}
    single = run(coll, [{"$match": {"b": {"$exists": False}}},
                        {"$group": {"_id": "$b", "n": {"$sum": 1}}}])
    assert single == [{"_id": None, "n": 1}]


def test_sort_skip_limit(sales):
    got = run(sales, [{"$sort": {"qty": -1, "_id": 1}}, {"$skip": 1}, {"$limit": 3},
                      {"$project": {"_id": 1}}])
    assert got == [{"_id": 3}, {"_id": 5}, {"_id": 1}]


def test_unwind(sales):
    got = run(sales, [{"$unwind": "$tags"}, {"$project": {"tags": 1}}])
    assert sorted((d["_id"], d["tags"]) for d in got) == [
        (1, "a"), (1, "b"), (2, "b"), (4, "a"), (4, "c")]
    # Each document's elements come out in array order.
    assert [d["tags"] for d in got if d["_id"] == 4] == ["c", "a"]


def test_unwind_options(sales):
    got = run(sales, [
        {"$unwind": {"path": "$tags", "includeArrayIndex": "i",
                     "preserveNullAndEmptyArrays": True}},
        {"$project": {"tags": 1, "i": 1}},
        {"$sort": {"_id": 1, "i": 1}},
    ])
    assert got == [
        {"_id": 1, "tags": "a", "i": Int64(0)}, {"_id": 1, "tags": "b", "i": Int64(1)},
        {"_id": 2, "tags": "b", "i": Int64(0)}, {"_id": 3, "i": None},
        {"_id": 4, "tags": "c", "i": Int64(0)}, {"_id": 4, "tags": "a", "i": Int64(1)},
        {"_id": 5, "i": None},
    ]


def test_unwind_of_a_scalar_is_one_document(coll):
    coll.insert_many([{"_id": 1, "v": "x"}, {"_id": 2, "v": None}])
    assert run(coll, [{"$unwind": "$v"}]) == [{"_id": 1, "v": "x"}]


def test_match_after_group_and_accumulators_over_mixed_types(coll):
    coll.insert_many([{"k": "a", "v": 1}, {"k": "a", "v": "text"}, {"k": "b", "v": "t"},
                      {"k": "b"}, {"k": "a", "v": 2.5}])
    got = run(coll, [
        {"$group": {"_id": "$k", "avg": {"$avg": "$v"}, "sum": {"$sum": "$v"},
                    "min": {"$min": "$v"}, "max": {"$max": "$v"}, "n": {"$sum": 1}}},
        {"$match": {"n": {"$gte": 2}}},
        {"$sort": {"_id": 1}},
    ])
    assert got == [
        {"_id": "a", "avg": 1.75, "sum": 3.5, "min": 1, "max": "text", "n": 3},
        {"_id": "b", "avg": None, "sum": 0, "min": "t", "max": "t", "n": 2},
    ]


def test_count_stage(sales):
    assert run(sales, [{"$match": {"store": "N"}}, {"$count": "n"}]) == [{"n": 3}]
    assert run(sales, [{"$match": {"store": "nowhere"}}, {"$count": "n"}]) == []


def test_sort_by_count(sales):
    got = run(sales, [{"$sortByCount": "$item"}])
    assert [g["count"] for g in got] == [2, 2, 1]
    assert sorted(g["_id"] for g in got[:2]) == ["abc", "xyz"] and got[2]["_id"] == "jkl"


def test_replace_root_and_replace_with(coll):
    coll.insert_many([{"_id": 1, "in": {"a": 1, "b": {"c": 2}}}, {"_id": 2, "in": {"a": 3}}])
    assert run(coll, [{"$sort": {"_id": 1}}, {"$replaceRoot": {"newRoot": "$in"}}]) == [
        {"a": 1, "b": {"c": 2}}, {"a": 3}]
    assert run(coll, [{"$match": {"_id": 1}}, {"$replaceWith": "$in.b"}]) == [{"c": 2}]
    with pytest.raises(OperationFailure) as err:
        run(coll, [{"$replaceRoot": {"newRoot": "$in.a"}}])
    assert err.value.code == 40228


def test_lookup_equality(db):
    db.orders.insert_many([{"_id": 1, "item": "almonds", "qty": 2},
                           {"_id": 2, "item": "pecans", "qty": 1},
                           {"_id": 3}])
    db.inventory.insert_many([{"_id": 1, "sku": "almonds", "stock": 120},
                              {"_id": 2, "sku": "bread", "stock": 80},
                              {"_id": 3, "sku": "pecans", "stock": 70},
                              {"_id": 4, "sku": None},
                              {"_id": 5}])
    got = run(db.orders, [
        {"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku",
                     "as": "stock"}},
        {"$sort": {"_id": 1}},
    ])
    assert got[0]["stock"] == [{"_id": 1, "sku": "almonds", "stock": 120}]
    assert got[1]["stock"] == [{"_id": 3, "sku": "pecans", "stock": 70}]
    # A missing localField matches foreign documents whose field is null or missing.
    assert sorted(d["_id"] for d in got[2]["stock"]) == [4, 5]


def test_lookup_pipeline_with_let(db):
    db.orders.insert_many([{"_id": 1, "item": "a", "qty": 5}, {"_id": 2, "item": "b", "qty": 1}])
    db.warehouse.insert_many([{"sku": "a", "instock": 10}, {"sku": "a", "instock": 2},
                              {"sku": "b", "instock": 0}])
    got = run(db.orders, [
        {"$lookup": {"from": "warehouse", "let": {"it": "$item", "need": "$qty"},
                     "pipeline": [
                         {"$match": {"$expr": {"$and": [{"$eq": ["$sku", "$$it"]},
                                                        {"$gte": ["$instock", "$$need"]}]}}},
                         {"$project": {"_id": 0, "instock": 1}}],
                     "as": "ok"}},
        {"$sort": {"_id": 1}},
    ])
    assert [d["ok"] for d in got] == [[{"instock": 10}], []]


def test_lookup_from_a_missing_collection_gives_empty_arrays(sales):
    got = run(sales, [{"$lookup": {"from": "nothing", "localField": "item",
                                   "foreignField": "x", "as": "j"}}])
    assert len(got) == 5 and all(d["j"] == [] for d in got)


def test_facet(sales):
    [got] = run(sales, [{"$facet": {
        "byStore": [{"$group": {"_id": "$store", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}],
        "top": [{"$sort": {"qty": -1}}, {"$limit": 1}, {"$project": {"_id": 1}}],
        "none": [{"$match": {"qty": {"$gt": 1000}}}],
    }}])
    assert got == {"byStore": [{"_id": "N", "n": 3}, {"_id": "S", "n": 2}],
                   "top": [{"_id": 4}], "none": []}


def test_aggregate_on_a_missing_collection_is_empty(db):
    assert run(db.nothing, [{"$match": {}}]) == []
    assert run(db.nothing, [{"$count": "n"}]) == []


def test_results_over_batched_cursors(coll):
    coll.insert_many([{"_id": i, "g": i % 10} for i in range(500)])
    got = run(coll, [{"$match": {"g": {"$lt": 5}}}, {"$sort": {"_id": -1}}], batchSize=7)
    assert [d["_id"] for d in got] == [i for i in range(499, -1, -1) if i % 10 < 5]
    db = coll.database
    reply = db.command("aggregate", coll.name, pipeline=[{"$project": {"_id": 1}}],
                       cursor={"batchSize": 3})
    cursor = reply["cursor"]
    assert len(cursor["firstBatch"]) == 3 and cursor["id"] != 0
    assert cursor["ns"] == f"{db.name}.{coll.name}"
    seen = len(cursor["firstBatch"])
    cursor_id = cursor["id"]
    while cursor_id:
        more = db.command("getMore", Int64(cursor_id), collection=coll.name, batchSize=50)
        seen += len(more["cursor"]["nextBatch"])
        cursor_id = more["cursor"]["id"]
    assert seen == 500


def test_hint(sales):
    sales.create_index("item")
    got = run(sales, [{"$match": {"item": "xyz"}}, {"$project": {"_id": 1}}], hint="item_1")
    assert sorted(d["_id"] for d in got) == [3, 4]
    # A hinted sparse index holds only the documents with its field, so the hint shows in
    # the results: document 5 (item abc, no tags) is not reached through tags_1.
    sales.create_index("tags", sparse=True)
    assert sorted(d["_id"] for d in run(sales, [{"$match": {"item": "abc"}}])) == [1, 5]
    assert [d["_id"] for d in run(sales, [{"$match": {"item": "abc"}}], hint="tags_1")] == [1]
    # explain shows the plan the hinted run uses.
    plan = sales.database.command("aggregate", sales.name, pipeline=[{"$match": {"item": "abc"}}],
                                  explain=True, hint="tags_1")
    assert uses_index(plan, "tags_1"), plan


def test_unknown_hint_is_bad_value(sales):
    with pytest.raises(OperationFailure) as err:
        run(sales, [{"$match": {"item": "xyz"}}], hint="no_such_index")
    assert err.value.code == 2


def test_zero_first_batch(coll):
    coll.insert_many([{"_id": i} for i in range(5)])
    reply = coll.database.command("aggregate", coll.name, pipeline=[], cursor={"batchSize": 0})
    assert reply["cursor"]["firstBatch"] == [] and reply["cursor"]["id"] != 0
    more = coll.database.command("getMore", Int64(reply["cursor"]["id"]), collection=coll.name)
    assert len(more["cursor"]["nextBatch"]) == 5


def test_large_group(coll):
    coll.insert_many([{"k": i % 100, "v": i} for i in range(10_000)])
    got = run(coll, [{"$group": {"_id": "$k", "s": {"$sum": "$v"}, "n": {"$sum": 1}}},
                     {"$sort": {"_id": 1}}])
    assert len(got) == 100
    assert all(g["n"] == 100 for g in got)
    assert got[7]["s"] == sum(range(7, 10_000, 100))


@pytest.mark.parametrize(("pipeline", "code"), [
    ([{"$foo": {}}], 40324),
    ([{"$match": {}, "$limit": 1}], 40323),
    ([{"$group": {"total": {"$sum": 1}}}], 15955),
    ([{"$limit": 0}], 15958),
    ([{"$limit": -1}], 5107201),
], ids=["unknown-stage", "two-fields", "group-without-id", "zero-limit", "negative-limit"])
def test_malformed_pipelines(sales, pipeline, code):
    with pytest.raises(OperationFailure) as err:
        run(sales, pipeline)
    assert err.value.code == code
