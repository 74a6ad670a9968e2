"""Variables through pymongo against the real binary: the `let` option of find, aggregate,
update, delete, findAndModify and their bulk forms; `$lookup` with `let` and `pipeline`
(seeing the command's variables too); the `$let` expression; `$$NOW` and `$$CLUSTER_TIME`
(one value per command); `$getField`, `$setField` and `$unsetField` reading and writing
dotted and `$`-prefixed field names; and mongod's codes for bad variables and arguments.

Every expected result is what mongod returns for the same request: the examples of the
MongoDB manual pages named in each test, the drivers' CRUD unified spec files
(`*-let.json`, `*-dots_and_dollars.json`), or mongod's own jstests
(`jstests/aggregation/expressions/expression_get_field.js`, `expression_set_field.js`,
`let.js`)."""

import datetime

import pytest
from bson import SON, Timestamp
from pymongo import DeleteMany, DeleteOne, ReplaceOne, ReturnDocument, UpdateMany, UpdateOne
from pymongo.errors import BulkWriteError, OperationFailure, WriteError

# The manual's `let` examples ("Use Variables in let", on the find, aggregate, update,
# delete and findAndModify pages) share this collection.
CAKES = [
    {"_id": 1, "flavor": "chocolate"},
    {"_id": 2, "flavor": "strawberry"},
    {"_id": 3, "flavor": "cherry"},
]


@pytest.fixture
def cakes(coll):
    coll.insert_many(CAKES)
    return coll


def by_id(docs):
    return sorted(docs, key=lambda d: d["_id"])


def test_find_with_let(cakes):
    got = list(cakes.find({"$expr": {"$eq": ["$flavor", "$$targetFlavor"]}}, {"_id": 0},
                          let={"targetFlavor": "chocolate"}))
    assert got == [{"flavor": "chocolate"}]
    # find-let.json: `$$id` in `$expr`.
    assert list(cakes.find({"$expr": {"$eq": ["$_id", "$$id"]}}, let={"id": 1})) == [CAKES[0]]
    # Variables in the projection too, and one `let` value computed from another.
    got = list(cakes.find({"_id": 2}, {"_id": 0, "f": "$$label"},
                          let={"prefix": "cake:", "label": {"$concat": ["$$prefix", "x"]}}))
    assert got == [{"f": "cake:x"}]


def test_aggregate_with_let(coll):
    # The aggregate page's example.
    coll.insert_many([
        {"_id": 1, "flavor": "chocolate", "salesTotal": 1580},
        {"_id": 2, "flavor": "strawberry", "salesTotal": 4350},
        {"_id": 3, "flavor": "cherry", "salesTotal": 2150},
    ])
    got = list(coll.aggregate([{"$match": {"$expr": {"$gt": ["$salesTotal", "$$targetTotal"]}}}],
                              let={"targetTotal": 3000}))
    assert got == [{"_id": 2, "flavor": "strawberry", "salesTotal": 4350}]
    # aggregate-let.json: literals, `$literal` of a `$` string, and `$rand` evaluated once.
    got = list(coll.aggregate(
        [{"$match": {"$expr": {"$eq": ["$_id", "$$id"]}}},
         {"$project": {"_id": 0, "x": "$$x", "y": "$$y", "rand": "$$rand"}}],
        let={"id": 1, "x": "foo", "y": {"$literal": "$bar"}, "rand": {"$rand": {}}}))
    assert len(got) == 1
    assert got[0]["x"] == "foo" and got[0]["y"] == "$bar"
    assert isinstance(got[0]["rand"], float) and 0 <= got[0]["rand"] < 1
    rands = {d["r"] for d in coll.aggregate([{"$project": {"r": "$$r"}}], let={"r": {"$rand": {}}})}
    assert len(rands) == 1


def test_update_with_let(cakes):
    # The update page's example: `$expr` filter and a pipeline update read the variables.
    res = cakes.database.command(SON([
        ("update", cakes.name),
        ("updates", [{"q": {"$expr": {"$eq": ["$flavor", "$$oldFlavor"]}},
                      "u": [{"$set": {"flavor": "$$newFlavor"}}]}]),
        ("let", {"oldFlavor": "cherry", "newFlavor": "orange"}),
    ]))
    assert (res["n"], res["nModified"]) == (1, 1)
    assert cakes.find_one({"_id": 3}) == {"_id": 3, "flavor": "orange"}
    # updateOne-let.json / updateMany-let.json.
    res = cakes.update_one({"$expr": {"$eq": ["$_id", "$$id"]}}, [{"$set": {"x": "$$x"}}],
                           let={"id": 1, "x": "foo"})
    assert (res.matched_count, res.modified_count) == (1, 1)
    res = cakes.update_many({"$expr": {"$gt": ["$_id", "$$one"]}}, [{"$set": {"x": "$$x"}}],
                            let={"one": 1, "x": "bar"})
    assert (res.matched_count, res.modified_count) == (2, 2)
    assert [d.get("x") for d in cakes.find().sort("_id", 1)] == ["foo", "bar", "bar"]
    # replaceOne-let.json: the filter only.
    res = cakes.replace_one({"$expr": {"$eq": ["$_id", "$$id"]}}, {"x": "r"}, let={"id": 2})
    assert res.modified_count == 1
    assert cakes.find_one({"_id": 2}) == {"_id": 2, "x": "r"}


def test_delete_with_let(cakes):
    # The delete page's example, and deleteOne-let.json / deleteMany-let.json.
    assert cakes.delete_one({"$expr": {"$eq": ["$flavor", "$$targetFlavor"]}},
                            let={"targetFlavor": "strawberry"}).deleted_count == 1
    assert cakes.delete_many({"$expr": {"$ne": ["$_id", "$$keep"]}},
                             let={"keep": 3}).deleted_count == 1
    assert list(cakes.find()) == [CAKES[2]]


def test_find_and_modify_with_let(cakes):
    # findOneAndUpdate-let.json, findOneAndReplace-let.json, findOneAndDelete-let.json.
    got = cakes.find_one_and_update({"$expr": {"$eq": ["$_id", "$$id"]}},
                                    [{"$set": {"x": "$$x"}}], let={"id": 1, "x": "foo"})
    assert got == CAKES[0]
    got = cakes.find_one_and_replace({"$expr": {"$eq": ["$_id", "$$id"]}}, {"x": "x"},
                                     let={"id": 2}, return_document=ReturnDocument.AFTER)
    assert got == {"_id": 2, "x": "x"}
    got = cakes.find_one_and_delete({"$expr": {"$eq": ["$flavor", "$$cakeFlavor"]}},
                                    let={"cakeFlavor": "cherry"})
    assert got == CAKES[2]
    assert by_id(cakes.find()) == [{"_id": 1, "flavor": "chocolate", "x": "foo"},
                                   {"_id": 2, "x": "x"}]


def test_bulk_write_with_let(cakes):
    # bulkWrite-*-let.json: the command's `let` reaches every statement.
    res = cakes.bulk_write([
        UpdateOne({"$expr": {"$eq": ["$_id", "$$id"]}}, [{"$set": {"x": 22}}]),
        UpdateMany({"$expr": {"$eq": ["$_id", "$$id"]}}, [{"$set": {"y": "$$id"}}]),
        ReplaceOne({"$expr": {"$eq": ["$_id", "$$other"]}}, {"x": 3}),
    ], let={"id": 1, "other": 2})
    assert (res.matched_count, res.modified_count) == (3, 3)
    res = cakes.bulk_write([DeleteOne({"$expr": {"$eq": ["$_id", "$$id"]}}),
                            DeleteMany({"$expr": {"$eq": ["$_id", "$$other"]}})],
                           let={"id": 1, "other": 2})
    assert res.deleted_count == 2
    assert list(cakes.find()) == [CAKES[2]]


# The $lookup page's "Use multiple join conditions and a correlated subquery" example.
ORDERS = [
    {"_id": 1, "item": "almonds", "price": 12, "ordered": 2},
    {"_id": 2, "item": "pecans", "price": 20, "ordered": 1},
    {"_id": 3, "item": "cookies", "price": 10, "ordered": 60},
]
WAREHOUSES = [
    {"_id": 1, "stock_item": "almonds", "warehouse": "A", "instock": 120},
    {"_id": 2, "stock_item": "pecans", "warehouse": "A", "instock": 80},
    {"_id": 3, "stock_item": "almonds", "warehouse": "B", "instock": 60},
    {"_id": 4, "stock_item": "cookies", "warehouse": "B", "instock": 40},
    {"_id": 5, "stock_item": "cookies", "warehouse": "A", "instock": 80},
]


def test_lookup_let_pipeline_and_command_let(db):
    db.orders.insert_many(ORDERS)
    db.warehouses.insert_many(WAREHOUSES)
    lookup = {"$lookup": {
        "from": "warehouses",
        "let": {"order_item": "$item", "order_qty": "$ordered"},
        "pipeline": [
            {"$match": {"$expr": {"$and": [{"$eq": ["$stock_item", "$$order_item"]},
                                           {"$gte": ["$instock", "$$order_qty"]}]}}},
            {"$project": {"stock_item": 0, "_id": 0}},
        ],
        "as": "stockdata",
    }}
    got = list(db.orders.aggregate([lookup, {"$sort": {"_id": 1}}]))
    assert got == [
        {**ORDERS[0], "stockdata": [{"warehouse": "A", "instock": 120},
                                    {"warehouse": "B", "instock": 60}]},
        {**ORDERS[1], "stockdata": [{"warehouse": "A", "instock": 80}]},
        {**ORDERS[2], "stockdata": [{"warehouse": "A", "instock": 80}]},
    ]
    # The command's variables reach the sub-pipeline; a `$lookup` variable of the same
    # name hides the command's there.
    lookup["$lookup"]["pipeline"][0]["$match"]["$expr"]["$and"].append(
        {"$eq": ["$warehouse", "$$site"]})
    got = list(db.orders.aggregate([lookup, {"$sort": {"_id": 1}},
                                    {"$project": {"n": {"$size": "$stockdata"}}}],
                                   let={"site": "B", "order_qty": 1000}))
    assert got == [{"_id": 1, "n": 1}, {"_id": 2, "n": 0}, {"_id": 3, "n": 0}]


def test_let_expression(coll):
    # The $let page's example.
    coll.insert_many([{"_id": 1, "price": 10, "tax": 0.50, "applyDiscount": True},
                      {"_id": 2, "price": 10, "tax": 0.25, "applyDiscount": False}])
    got = list(coll.aggregate([{"$project": {"finalTotal": {"$let": {
        "vars": {"total": {"$add": ["$price", "$tax"]},
                 "discounted": {"$cond": {"if": "$applyDiscount", "then": 0.9, "else": 1}}},
        "in": {"$multiply": ["$$total", "$$discounted"]},
    }}}}, {"$sort": {"_id": 1}}]))
    assert [d["_id"] for d in got] == [1, 2]
    assert got[0]["finalTotal"] == pytest.approx(9.45)
    assert got[1]["finalTotal"] == pytest.approx(10.25)
    # jstests/aggregation/expressions/let.js: nesting, shadowing, and CURRENT rebound.
    got = list(coll.aggregate([{"$match": {"_id": 1}}, {"$project": {"_id": 0, "r": {"$let": {
        "vars": {"a": 1, "CURRENT": {"price": 3}},
        "in": [{"$let": {"vars": {"a": 2, "b": "$$a"}, "in": ["$$a", "$$b"]}}, "$price",
               "$$ROOT.price"],
    }}}}]))
    assert got == [{"r": [[2, 1], 3, 10]}]


def test_now_and_cluster_time_are_one_value_per_command(coll):
    coll.insert_many([{"_id": i} for i in range(5)])
    before = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    got = list(coll.aggregate([{"$project": {"now": "$$NOW", "ct": "$$CLUSTER_TIME"}}]))
    nows = {d["now"] for d in got}
    times = {d["ct"] for d in got}
    assert len(nows) == 1 and len(times) == 1
    now, ct = nows.pop(), times.pop()
    utc = now.replace(tzinfo=datetime.timezone.utc)
    assert isinstance(ct, Timestamp) and abs(ct.time - utc.timestamp()) < 5
    assert abs((now - before).total_seconds()) < 5
    # A pipeline updateMany stamps every document with the same $$NOW (the manual's
    # "updateMany with aggregation pipeline" example stamps `modified: "$$NOW"`).
    coll.update_many({}, [{"$set": {"modified": "$$NOW"}}])
    assert len(coll.distinct("modified")) == 1
    # `$$NOW` in a find filter.
    assert coll.count_documents({"$expr": {"$lte": ["$modified", "$$NOW"]}}) == 5
    # The next command gets a later (or equal) time.
    later = next(coll.aggregate([{"$limit": 1}, {"$project": {"ct": "$$CLUSTER_TIME"}}]))
    assert later["ct"] >= ct


# $getField / $setField / $unsetField: the manual's "inventory" examples.
PRICES = [
    {"_id": 1, "item": "sweatshirt", "price.usd": 45.99, "qty": 300},
    {"_id": 2, "item": "winter coat", "price.usd": 499.99, "qty": 200},
    {"_id": 3, "item": "sun dress", "price.usd": 199.99, "qty": 250},
    {"_id": 4, "item": "leather boots", "price.usd": 249.99, "qty": 300},
    {"_id": 5, "item": "bow tie", "price.usd": 9.99, "qty": 180},
]


def test_get_field_reads_dotted_and_dollar_names(coll):
    coll.insert_many(PRICES)
    got = coll.aggregate([{"$match": {"$expr": {"$gt": [{"$getField": "price.usd"}, 200]}}}])
    assert [d["_id"] for d in got] == [2, 4]
    coll.delete_many({})
    coll.insert_many([{"_id": d["_id"], "$price": d["price.usd"]} for d in PRICES])
    got = coll.aggregate([{"$match": {"$expr": {
        "$gt": [{"$getField": {"$literal": "$price"}}, 200]}}}])
    assert [d["_id"] for d in got] == [2, 4]
    # In a find filter and a find projection too.
    assert [d["_id"] for d in coll.find(
        {"$expr": {"$lt": [{"$getField": {"field": {"$literal": "$price"}, "input": "$$ROOT"}},
                           10]}})] == [5]
    got = coll.find_one({"_id": 1}, {"_id": 0, "p": {"$getField": {"$literal": "$price"}}})
    assert got == {"p": 45.99}


def test_set_and_unset_field(coll):
    coll.insert_many([{k: v for k, v in d.items() if k != "price.usd"} | {"price": d["price.usd"]}
                      for d in PRICES[:2]])
    got = list(coll.aggregate([
        {"$replaceWith": {"$setField": {"field": "price.usd", "input": "$$ROOT",
                                        "value": "$price"}}},
        {"$unset": "price"},
    ]))
    assert got == [{"_id": 1, "item": "sweatshirt", "qty": 300, "price.usd": 45.99},
                   {"_id": 2, "item": "winter coat", "qty": 200, "price.usd": 499.99}]
    # Updating a dotted field in place: the manual's "Update Fields that Contain Periods".
    coll.delete_many({})
    coll.insert_many(PRICES[:2])
    coll.update_one({"_id": 1}, [{"$replaceWith": {"$setField": {
        "field": "price.usd", "input": "$$ROOT", "value": 49.99}}}])
    assert coll.find_one({"_id": 1})["price.usd"] == 49.99
    coll.update_one({"_id": 2}, [{"$replaceWith": {"$unsetField": {
        "field": "price.usd", "input": "$$ROOT"}}}])
    assert coll.find_one({"_id": 2}) == {"_id": 2, "item": "winter coat", "qty": 200}


@pytest.mark.parametrize("field", ["$a", "a.b"])
def test_dots_and_dollars_updates(coll, field):
    # updateOne/updateMany/findOneAndUpdate/bulkWrite-*-dots_and_dollars.json (5.0+ servers).
    coll.insert_one({"_id": 1, "foo": {}})
    top = [{"$replaceWith": {"$setField": {"field": {"$literal": field}, "value": 1,
                                           "input": "$$ROOT"}}}]
    res = coll.update_one({"_id": 1}, top)
    assert (res.matched_count, res.modified_count) == (1, 1)
    assert coll.find_one() == {"_id": 1, "foo": {}, field: 1}
    embedded = [{"$set": {"foo": {"$setField": {"field": {"$literal": field}, "value": 1,
                                                "input": "$foo"}}}}]
    assert coll.find_one_and_update({"_id": 1}, embedded,
                                    return_document=ReturnDocument.AFTER)["foo"] == {field: 1}
    res = coll.bulk_write([UpdateMany({"_id": 1}, [{"$set": {"bar": {"$setField": {
        "field": {"$literal": field}, "value": 2, "input": {}}}}}])])
    assert res.modified_count == 1
    assert coll.find_one() == {"_id": 1, "foo": {field: 1}, field: 1, "bar": {field: 2}}


def code_of(call):
    with pytest.raises(OperationFailure) as e:
        call()
    return e.value.code


def test_bad_variables_are_mongods_errors(cakes):
    find = lambda **kw: list(cakes.find({}, **kw))
    # Names (16866-16868, "Invalid 'let' parameter"), system variables (4738901), field
    # reads (4890500), undefined variables (17276).
    with pytest.raises(OperationFailure) as e:
        find(let={"Bad": 1})
    assert e.value.code == 16867
    assert e.value.details["errmsg"] == (
        "Invalid 'let' parameter :: caused by :: 'Bad' starts with an invalid character for a "
        "user variable name")
    assert code_of(lambda: find(let={"a-b": 1})) == 16868
    assert code_of(lambda: find(let={"NOW": 1})) == 4738901
    assert code_of(lambda: find(let={"x": "$flavor"})) == 4890500
    assert code_of(lambda: list(cakes.find({"$expr": "$$nope"}))) == 17276
    assert code_of(lambda: list(cakes.aggregate([{"$project": {"x": "$$x"}}]))) == 17276
    assert code_of(lambda: list(cakes.find({"$expr": "$$_x"}))) == 16867
    # In update and delete, each statement binds `let`: a bad one is a write error.
    with pytest.raises(WriteError) as e:
        cakes.update_one({"_id": 1}, [{"$set": {"x": 1}}], let={"Bad": 1})
    assert e.value.code == 16867
    with pytest.raises(BulkWriteError) as e:
        cakes.bulk_write([DeleteOne({"_id": 1}), DeleteOne({"_id": 2})], ordered=False,
                         let={"x": "$a"})
    assert [w["code"] for w in e.value.details["writeErrors"]] == [4890500, 4890500]
    assert cakes.count_documents({}) == 3
    # A `let` that is not a document fails the command (TypeMismatch), as mongod's parser.
    for command in (SON([("update", cakes.name), ("updates", [{"q": {}, "u": {"$set": {"a": 1}}}])]),
                    SON([("delete", cakes.name), ("deletes", [{"q": {}, "limit": 0}])]),
                    SON([("find", cakes.name)])):
        command["let"] = 5
        assert code_of(lambda: cakes.database.command(command)) == 14
    assert cakes.count_documents({"a": 1}) == 0
    # $let (16874-16877, 10065; a name is checked as a write).
    let_code = lambda spec: code_of(lambda: list(cakes.aggregate([{"$project": {"x": spec}}])))
    assert let_code({"$let": 1}) == 16874
    assert let_code({"$let": {"vars": {}, "in": 1, "z": 1}}) == 16875
    assert let_code({"$let": {"in": 1}}) == 16876
    assert let_code({"$let": {"vars": {}}}) == 16877
    assert let_code({"$let": {"vars": {"NOW": 1}, "in": 1}}) == 16867


def test_field_operator_errors(cakes):
    # expression_get_field.js and expression_set_field.js.
    code = lambda e: code_of(lambda: list(cakes.aggregate([{"$project": {"t": e}}])))
    assert code({"$getField": {"input": {"a": "b"}}}) == 3041702
    assert code({"$getField": {"field": "a"}}) == 3041703
    assert code({"$getField": {"field": "a", "input": {}, "unknown": True}}) == 3041701
    assert code({"$getField": {"field": "$a", "input": {"a": "b"}}}) == 5654600
    assert code({"$getField": {"$add": [2, 3]}}) == 5654601
    assert code({"$getField": 5}) == 5654602
    assert code({"$setField": 5}) == 4161100
    assert code({"$setField": {"field": "a", "input": {}, "value": 1, "x": 1}}) == 4161101
    assert code({"$setField": {"input": {"a": "b"}}}) == 4161102
    assert code({"$setField": {"field": "a", "input": {}}}) == 4161103
    assert code({"$setField": {"field": "a", "value": 0}}) == 4161109
    assert code({"$setField": {"field": "a", "input": True, "value": 24}}) == 4161105
    assert code({"$setField": {"field": {"$concat": ["a", "b"]}, "input": {}, "value": 1}}) \
        == 4161106
    assert code({"$setField": {"field": True, "input": {}, "value": 24}}) == 4161107
    assert code({"$setField": {"field": "$f", "input": {}, "value": 0}}) == 4161108
    assert code({"$unsetField": {"field": "a", "value": "foo"}}) == 4161101
