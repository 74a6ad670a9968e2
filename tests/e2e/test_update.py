"""The `update` command through pymongo's update_one, update_many and replace_one against
the real binary: every update operator in MongoDB's list ($set $unset $inc $mul $min $max
$rename $setOnInsert $currentDate $push with $each/$slice/$sort/$position, $addToSet, $pop,
$pull, $pullAll), the positional `$`, `$[]` and `$[<id>]` with arrayFilters, upserts (the
upserted `_id` in the reply), matched/modified counts (a no-op update modifies nothing),
replacements, and the errors MongoDB 7.0 gives: 66 ImmutableField for a changed `_id`, 9
FailedToParse for an unknown modifier, 14 TypeMismatch for `$inc` on a string, 40
ConflictingUpdateOperators, 28 PathNotViable, 2 BadValue for a positional operator without a
match or an `$[<id>]` without its filter."""

import datetime

import pytest
from bson import Int64, ObjectId, Timestamp
from pymongo.errors import OperationFailure, WriteError

OPERATOR_CASES = [
    # (document before, update, document after)
    ({"a": 1}, {"$set": {"a": 5, "b.c": 1}}, {"a": 5, "b": {"c": 1}}),
    ({"arr": [1, 2, 3]}, {"$set": {"arr.1": "x"}}, {"arr": [1, "x", 3]}),
    ({"arr": [1, 2, 3]}, {"$set": {"arr.5": 9}}, {"arr": [1, 2, 3, None, None, 9]}),
    ({"a": {"b": 1, "c": 2}}, {"$set": {"a": {"z": 1}}}, {"a": {"z": 1}}),
    ({"a": 1, "b": 2}, {"$unset": {"a": ""}}, {"b": 2}),
    ({"a": {"b": 1, "c": 2}}, {"$unset": {"a.b": 1}}, {"a": {"c": 2}}),
    ({"arr": [1, 2, 3]}, {"$unset": {"arr.0": ""}}, {"arr": [None, 2, 3]}),
    ({"n": 1, "m": 1}, {"$inc": {"n": 2, "m": -1.5, "new": 1}}, {"n": 3, "m": -0.5, "new": 1}),
    ({"n": 2147483647}, {"$inc": {"n": 1}}, {"n": Int64(2147483648)}),
    ({"p": 1.5}, {"$mul": {"p": 2, "missing": 3}}, {"p": 3.0, "missing": 0}),
    ({"lo": 10, "hi": 10}, {"$min": {"lo": 5, "hi": 50}}, {"lo": 5, "hi": 10}),
    ({"lo": 10, "hi": 10}, {"$max": {"lo": 5, "hi": 50}}, {"lo": 10, "hi": 50}),
    ({}, {"$min": {"x": 3}}, {"x": 3}),
    ({"d": datetime.datetime(2020, 1, 1)}, {"$max": {"d": datetime.datetime(2021, 1, 1)}},
     {"d": datetime.datetime(2021, 1, 1)}),
    ({"old": 1, "a": {"b": 2, "x": 3}}, {"$rename": {"old": "new", "a.b": "c"}},
     {"new": 1, "a": {"x": 3}, "c": 2}),
    ({"k": 1}, {"$rename": {"missing": "other"}}, {"k": 1}),
    ({"a": 1, "b": 2}, {"$rename": {"a": "b"}}, {"b": 1}),
    ({"k": 1}, {"$pop": {"missing": 1}}, {"k": 1}),
    ({"k": 1}, {"$setOnInsert": {"s": 1}, "$set": {"t": 2}}, {"k": 1, "t": 2}),
    ({"arr": [1, 2]}, {"$push": {"arr": 3}}, {"arr": [1, 2, 3]}),
    ({}, {"$push": {"arr": [9]}}, {"arr": [[9]]}),
    ({"s": [2, 3]}, {"$push": {"s": {"$each": [5, 1], "$position": 0}}}, {"s": [5, 1, 2, 3]}),
    ({"s": [2, 3]}, {"$push": {"s": {"$each": [7], "$position": -1}}}, {"s": [2, 7, 3]}),
    ({"s": [3, 7, 1]}, {"$push": {"s": {"$each": [9, 0], "$sort": 1, "$slice": 3}}},
     {"s": [0, 1, 3]}),
    ({"s": [3, 7, 1]}, {"$push": {"s": {"$each": [9, 0], "$sort": 1, "$slice": -2}}},
     {"s": [7, 9]}),
    ({"s": [3, 7, 1]}, {"$push": {"s": {"$each": [], "$sort": -1}}}, {"s": [7, 3, 1]}),
    ({"q": [{"k": 1}, {"k": 3}]}, {"$push": {"q": {"$each": [{"k": 2}], "$sort": {"k": -1}}}},
     {"q": [{"k": 3}, {"k": 2}, {"k": 1}]}),
    ({"t": ["a"]}, {"$addToSet": {"t": {"$each": ["b", "a", "c", "c"]}}}, {"t": ["a", "b", "c"]}),
    ({"t": [1]}, {"$addToSet": {"t": 1.0}}, {"t": [1]}),
    ({"t": [{"a": 1}]}, {"$addToSet": {"t": {"a": 2}}}, {"t": [{"a": 1}, {"a": 2}]}),
    ({"arr": [1, 2, 3]}, {"$pop": {"arr": 1}}, {"arr": [1, 2]}),
    ({"arr": [1, 2, 3]}, {"$pop": {"arr": -1}}, {"arr": [2, 3]}),
    ({"arr": [1, 5, 7, 3]}, {"$pull": {"arr": {"$gte": 5}}}, {"arr": [1, 3]}),
    ({"arr": [1, 2, 1]}, {"$pull": {"arr": 1}}, {"arr": [2]}),
    ({"it": [{"s": "x", "q": 1}, {"s": "y", "q": 2}, {"s": "x", "q": 3}]},
     {"$pull": {"it": {"s": "x", "q": {"$gt": 2}}}},
     {"it": [{"s": "x", "q": 1}, {"s": "y", "q": 2}]}),
    ({"arr": [1, 2, 3, 1, 4]}, {"$pullAll": {"arr": [1, 3]}}, {"arr": [2, 4]}),
    ({"g": [85, 80, 80]}, {"$inc": {"g.$[]": 10}}, {"g": [95, 90, 90]}),
    ({"g": [{"v": 1}, {"v": 2}]}, {"$set": {"g.$[].w": 0}},
     {"g": [{"v": 1, "w": 0}, {"v": 2, "w": 0}]}),
]


@pytest.mark.parametrize(("before", "update", "after"), OPERATOR_CASES,
                         ids=[str(c[1]) for c in OPERATOR_CASES])
def test_operator(coll, before, update, after):
    coll.insert_one({"_id": 1, **before})
    result = coll.update_one({"_id": 1}, update)
    assert result.matched_count == 1
    assert result.modified_count == (0 if before == after else 1)
    assert coll.find_one({"_id": 1}) == {"_id": 1, **after}


def test_current_date(coll):
    coll.insert_one({"_id": 1})
    before = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    coll.update_one({"_id": 1}, {"$currentDate": {"d": True, "t": {"$type": "timestamp"},
                                                   "e": {"$type": "date"}}})
    doc = coll.find_one({"_id": 1})
    assert isinstance(doc["d"], datetime.datetime) and isinstance(doc["e"], datetime.datetime)
    assert abs((doc["d"] - before).total_seconds()) < 60
    assert isinstance(doc["t"], Timestamp)
    assert abs(doc["t"].time - before.replace(tzinfo=datetime.timezone.utc).timestamp()) < 60


def test_positional_operator_updates_the_first_match(coll):
    coll.insert_one({"_id": 1, "grades": [85, 80, 80], "items": [{"s": "a", "q": 1},
                                                                {"s": "b", "q": 2}]})
    coll.update_one({"_id": 1, "grades": 80}, {"$set": {"grades.$": 82}})
    coll.update_one({"items.s": "b"}, {"$inc": {"items.$.q": 5}})
    assert coll.find_one({"_id": 1}) == {
        "_id": 1, "grades": [85, 82, 80], "items": [{"s": "a", "q": 1}, {"s": "b", "q": 7}]}


def test_positional_operator_without_a_match_is_bad_value(coll):
    coll.insert_one({"_id": 1, "grades": [1, 2]})
    with pytest.raises(WriteError) as err:
        coll.update_one({"_id": 1}, {"$set": {"grades.$": 0}})
    assert err.value.code == 2
    assert "positional operator did not find the match" in str(err.value)


def test_array_filters(coll):
    coll.insert_one({"_id": 1, "g": [95, 92, 90, 50],
                     "items": [{"sku": "x", "qty": 1}, {"sku": "y", "qty": 2},
                               {"sku": "x", "qty": 3}]})
    result = coll.update_one({"_id": 1}, {"$set": {"g.$[high]": 100, "items.$[it].qty": 0}},
                             array_filters=[{"high": {"$gte": 92}}, {"it.sku": "x"}])
    assert result.modified_count == 1
    assert coll.find_one({"_id": 1}) == {
        "_id": 1, "g": [100, 100, 90, 50],
        "items": [{"sku": "x", "qty": 0}, {"sku": "y", "qty": 2}, {"sku": "x", "qty": 0}]}


def test_nested_array_filters(coll):
    coll.insert_one({"_id": 1, "m": [{"k": 1, "v": [1, 5, 9]}, {"k": 2, "v": [5, 6]}]})
    coll.update_one({}, {"$inc": {"m.$[a].v.$[b]": 100}},
                    array_filters=[{"a.k": 2}, {"b": {"$gte": 6}}])
    assert coll.find_one()["m"] == [{"k": 1, "v": [1, 5, 9]}, {"k": 2, "v": [5, 106]}]


def test_identifier_without_an_array_filter_is_bad_value(coll):
    coll.insert_one({"_id": 1, "g": [1]})
    with pytest.raises(WriteError) as err:
        coll.update_one({}, {"$set": {"g.$[x]": 0}})
    assert err.value.code == 2


def test_unused_array_filter_is_failed_to_parse(coll):
    coll.insert_one({"_id": 1, "g": [1]})
    with pytest.raises(WriteError) as err:
        coll.update_one({}, {"$set": {"g.0": 0}}, array_filters=[{"x": 1}])
    assert err.value.code == 9


def test_update_many_counts_matched_and_modified(coll):
    coll.insert_many([{"_id": i, "v": i % 3, "flag": i == 0} for i in range(9)])
    result = coll.update_many({"v": 0}, {"$set": {"flag": True}})
    assert (result.matched_count, result.modified_count) == (3, 2)
    assert result.raw_result["n"] == 3 and result.raw_result["nModified"] == 2
    assert coll.count_documents({"flag": True}) == 3
    assert coll.update_many({"v": 7}, {"$set": {"x": 1}}).matched_count == 0


def test_update_one_changes_only_one_document(coll):
    coll.insert_many([{"_id": i, "v": 1} for i in range(5)])
    assert coll.update_one({"v": 1}, {"$inc": {"v": 1}}).modified_count == 1
    assert coll.count_documents({"v": 2}) == 1


def test_noop_update_modifies_nothing(coll):
    coll.insert_one({"_id": 1, "a": 5, "t": ["x"]})
    for update in ({"$set": {"a": 5}}, {"$inc": {"a": 0}}, {"$addToSet": {"t": "x"}},
                   {"$unset": {"missing": ""}}, {"$pull": {"t": "zzz"}}, {"$min": {"a": 9}}):
        result = coll.update_one({"_id": 1}, update)
        assert (result.matched_count, result.modified_count) == (1, 0), update
    assert coll.find_one({"_id": 1}) == {"_id": 1, "a": 5, "t": ["x"]}


def test_empty_operand_is_a_noop(coll):
    coll.insert_one({"_id": 1, "a": 1})
    result = coll.update_one({"_id": 1}, {"$set": {}, "$unset": {}})
    assert (result.matched_count, result.modified_count) == (1, 0)


def test_upsert_inserts_with_the_filter_equalities(coll):
    result = coll.update_one({"k": "new", "n": {"$gt": 5}}, {"$set": {"v": 1},
                                                             "$setOnInsert": {"created": True}},
                             upsert=True)
    assert result.matched_count == 0 and result.modified_count == 0
    assert isinstance(result.upserted_id, ObjectId)
    assert result.raw_result["n"] == 1
    assert coll.find_one({"_id": result.upserted_id}) == {
        "_id": result.upserted_id, "k": "new", "v": 1, "created": True}


def test_upsert_uses_the_filter_id(coll):
    result = coll.update_one({"_id": 42}, {"$inc": {"n": 1}}, upsert=True)
    assert result.upserted_id == 42
    result = coll.update_one({"_id": 42}, {"$inc": {"n": 1}, "$setOnInsert": {"s": 1}},
                             upsert=True)
    assert result.upserted_id is None and result.modified_count == 1
    assert coll.find_one({"_id": 42}) == {"_id": 42, "n": 2}


def test_upsert_of_update_many_inserts_one_document(coll):
    result = coll.update_many({"group": "g"}, {"$set": {"x": 1}}, upsert=True)
    assert result.upserted_id is not None
    assert list(coll.find({}, {"_id": 0})) == [{"group": "g", "x": 1}]


def test_upserted_indexes_in_a_batch(db):
    reply = db.command("update", "c", updates=[
        {"q": {"_id": 1}, "u": {"$set": {"a": 1}}, "upsert": True},
        {"q": {"_id": 1}, "u": {"$set": {"a": 2}}, "upsert": True},
        {"q": {"_id": 2}, "u": {"$set": {"a": 3}}, "upsert": True},
    ])
    assert reply["n"] == 3 and reply["nModified"] == 1
    assert reply["upserted"] == [{"index": 0, "_id": 1}, {"index": 2, "_id": 2}]


def test_replace_one(coll):
    coll.insert_one({"_id": 1, "a": 1, "b": 2})
    result = coll.replace_one({"a": 1}, {"c": 3})
    assert (result.matched_count, result.modified_count) == (1, 1)
    doc = coll.find_one({"_id": 1})
    assert doc == {"_id": 1, "c": 3} and list(doc) == ["_id", "c"]
    assert coll.replace_one({"_id": 1}, {"c": 3}).modified_count == 0
    assert coll.replace_one({"_id": 1}, {"_id": 1, "d": 4}).modified_count == 1


def test_replace_one_upsert(coll):
    result = coll.replace_one({"k": 1}, {"v": 2}, upsert=True)
    assert isinstance(result.upserted_id, ObjectId)
    assert coll.find_one({}, {"_id": 0}) == {"v": 2}
    result = coll.replace_one({"_id": "id"}, {"v": 3}, upsert=True)
    assert result.upserted_id == "id"


@pytest.mark.parametrize("how", ["set", "replace"])
def test_changing_id_is_immutable_field(coll, how):
    coll.insert_one({"_id": 1, "a": 1})
    with pytest.raises(WriteError) as err:
        if how == "set":
            coll.update_one({"_id": 1}, {"$set": {"_id": 2}})
        else:
            coll.replace_one({"_id": 1}, {"_id": 2, "a": 1})
    assert err.value.code == 66
    assert coll.find_one() == {"_id": 1, "a": 1}


def test_setting_id_to_its_own_value_is_allowed(coll):
    coll.insert_one({"_id": 1, "a": 1})
    assert coll.update_one({"_id": 1}, {"$set": {"_id": 1, "a": 2}}).modified_count == 1


def test_unknown_modifier_is_failed_to_parse(coll):
    coll.insert_one({"_id": 1})
    with pytest.raises(WriteError) as err:
        coll.update_one({"_id": 1}, {"$foo": {"a": 1}})
    assert err.value.code == 9
    assert "Unknown modifier: $foo" in str(err.value)


def test_inc_on_a_string_is_type_mismatch(coll):
    coll.insert_one({"_id": 1, "s": "text"})
    with pytest.raises(WriteError) as err:
        coll.update_one({"_id": 1}, {"$inc": {"s": 1}})
    assert err.value.code == 14
    assert coll.find_one() == {"_id": 1, "s": "text"}


def test_conflicting_paths_are_conflicting_update_operators(coll):
    coll.insert_one({"_id": 1, "a": {"b": 1}})
    with pytest.raises(WriteError) as err:
        coll.update_one({"_id": 1}, {"$set": {"a.b": 2}, "$inc": {"a": 1}})
    assert err.value.code == 40


def test_field_under_a_scalar_is_path_not_viable(coll):
    coll.insert_one({"_id": 1, "a": 5})
    with pytest.raises(WriteError) as err:
        coll.update_one({"_id": 1}, {"$set": {"a.b": 1}})
    assert err.value.code == 28


@pytest.mark.parametrize("update", [{"$push": {"n": 1}}, {"$addToSet": {"n": 1}},
                                    {"$pull": {"n": 1}}, {"$pop": {"n": 1}}])
def test_array_operators_on_a_scalar_fail(coll, update):
    coll.insert_one({"_id": 1, "n": 5})
    with pytest.raises(WriteError):
        coll.update_one({"_id": 1}, update)
    assert coll.find_one() == {"_id": 1, "n": 5}


def test_updates_keep_indexes_in_step(coll):
    coll.create_index("a")
    coll.create_index("tags")
    coll.insert_many([{"_id": i, "a": i, "tags": [i % 3]} for i in range(100)])
    coll.update_many({"a": {"$lt": 50}}, {"$inc": {"a": 1000}, "$push": {"tags": 7}})
    coll.replace_one({"_id": 99}, {"a": -1})
    coll.update_one({"_id": 98}, {"$unset": {"a": 1, "tags": 1}})
    for query in [{"a": {"$gte": 1000}}, {"a": {"$lt": 50}}, {"a": -1}, {"a": None},
                  {"tags": 7}, {"tags": 2}, {"tags": None}]:
        natural = sorted(d["_id"] for d in coll.find(query).hint([("$natural", 1)]))
        for index in ("a_1", "tags_1"):
            assert sorted(d["_id"] for d in coll.find(query).hint(index)) == natural, query
    assert coll.count_documents({"a": {"$gte": 1000}}) == 50


def test_ordered_batch_stops_at_a_failing_statement(db):
    db.c.insert_many([{"_id": 1, "s": "x"}, {"_id": 2, "n": 1}])
    reply = db.command("update", "c", updates=[
        {"q": {"_id": 2}, "u": {"$inc": {"n": 1}}},
        {"q": {"_id": 1}, "u": {"$inc": {"s": 1}}},
        {"q": {"_id": 2}, "u": {"$inc": {"n": 1}}},
    ])
    assert reply["n"] == 1 and reply["nModified"] == 1
    assert [(e["index"], e["code"]) for e in reply["writeErrors"]] == [(1, 14)]
    assert db.c.find_one({"_id": 2})["n"] == 2
    reply = db.command("update", "c", ordered=False, updates=[
        {"q": {"_id": 1}, "u": {"$inc": {"s": 1}}},
        {"q": {"_id": 2}, "u": {"$inc": {"n": 1}}},
    ])
    assert reply["n"] == 1 and [e["index"] for e in reply["writeErrors"]] == [0]
    assert db.c.find_one({"_id": 2})["n"] == 3


def test_ordered_batch_stops_before_a_later_unparsable_statement(db):
    # Statement 0 fails as it runs and statement 1 cannot be parsed: an ordered batch stops
    # at statement 0 and never reaches statement 1, so only one error is reported.
    db.c.insert_one({"_id": 1, "s": "x"})
    reply = db.command("update", "c", updates=[
        {"q": {"_id": 1}, "u": {"$inc": {"s": 1}}},
        {"q": {"_id": 1}, "u": {"$foo": {"a": 1}}},
    ])
    assert [(e["index"], e["code"]) for e in reply["writeErrors"]] == [(0, 14)]
    reply = db.command("update", "c", ordered=False, updates=[
        {"q": {"_id": 1}, "u": {"$inc": {"s": 1}}},
        {"q": {"_id": 1}, "u": {"$foo": {"a": 1}}},
    ])
    assert [(e["index"], e["code"]) for e in reply["writeErrors"]] == [(0, 14), (1, 9)]


def test_update_that_grows_a_document_past_16_mib_fails(coll):
    coll.insert_one({"_id": 1, "a": "x" * (9 * 1024 * 1024)})
    with pytest.raises(OperationFailure):
        coll.update_one({"_id": 1}, {"$set": {"b": "y" * (9 * 1024 * 1024)}})
    assert "b" not in coll.find_one({"_id": 1}, {"a": 0})

