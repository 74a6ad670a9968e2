"""`$fill` through pymongo against the real binary: constant values (the manual's daily
sales), `locf` and `linear` per partition (`partitionBy` and `partitionByFields`), date sort
keys, missing fields and mixed types, empty input, and mongod 7.0's codes for malformed
specs. Expected values are worked out by hand in the comments."""

from datetime import datetime

import pytest
from pymongo.errors import OperationFailure


def fill(coll, spec, *rest):
    return list(coll.aggregate([{"$fill": spec}, *rest]))


def code_of(coll, spec):
    with pytest.raises(OperationFailure) as e:
        fill(coll, spec)
    return e.value.code


def test_constant_values_fill_null_and_missing(coll):
    coll.insert_many([
        {"_id": 1, "date": datetime(2022, 2, 2), "bootsSold": 10, "sandalsSold": 20,
         "sneakersSold": 12},
        {"_id": 2, "date": datetime(2022, 2, 3), "bootsSold": 7, "sneakersSold": 18},
        {"_id": 3, "date": datetime(2022, 2, 4), "sneakersSold": 5, "sandalsSold": None},
    ])
    out = fill(coll, {"output": {"bootsSold": {"value": 0}, "sandalsSold": {"value": 0}}},
               {"$sort": {"_id": 1}})
    assert [(d["bootsSold"], d["sandalsSold"]) for d in out] == [(10, 20), (7, 0), (0, 0)]
    assert [d["sneakersSold"] for d in out] == [12, 18, 5]


def test_linear_and_locf_per_partition(coll):
    coll.insert_many([
        {"_id": 1, "store": "a", "t": 1, "price": 10, "score": 5},
        {"_id": 2, "store": "a", "t": 2, "price": None},
        {"_id": 3, "store": "a", "t": 4, "price": 40, "score": None},
        {"_id": 4, "store": "b", "t": 1},
        {"_id": 5, "store": "b", "t": 3, "price": 3, "score": 1},
        {"_id": 6, "store": "b", "t": 5, "price": None},
    ])
    spec = {"sortBy": {"t": 1}, "partitionByFields": ["store"],
            "output": {"price": {"method": "linear"}, "score": {"method": "locf"}}}
    out = {d["_id"]: d for d in fill(coll, spec)}
    # a: price 10 at t=1, 40 at t=4 -> t=2 is 10 + 1 * 30/3 = 20; score carried 5, 5, 5.
    assert [out[i]["price"] for i in (1, 2, 3)] == [10, 20.0, 40]
    assert [out[i]["score"] for i in (1, 2, 3)] == [5, 5, 5]
    # b: nothing before t=3 and nothing after it: the ends stay null.
    assert [out[i]["price"] for i in (4, 5, 6)] == [None, 3, None]
    assert [out[i]["score"] for i in (4, 5, 6)] == [None, 1, 1]
    by_expression = fill(coll, {**{k: v for k, v in spec.items() if k != "partitionByFields"},
                                "partitionBy": {"s": "$store"}})
    assert {d["_id"]: d["price"] for d in by_expression} == {i: out[i]["price"] for i in out}


def test_linear_over_dates(coll):
    coll.insert_many([
        {"_id": 1, "at": datetime(2024, 1, 1), "v": 0},
        {"_id": 2, "at": datetime(2024, 1, 2)},
        {"_id": 3, "at": datetime(2024, 1, 5), "v": 8},
    ])
    out = fill(coll, {"sortBy": {"at": 1}, "output": {"v": {"method": "linear"}}})
    # One day of four between the known points: 0 + 8 * 1/4.
    assert [d["v"] for d in out] == [0, 2.0, 8]


def test_empty_input_and_type_errors(coll):
    assert fill(coll, {"sortBy": {"t": 1}, "output": {"v": {"method": "linear"}}}) == []
    coll.insert_many([{"_id": 1, "t": 1, "v": "x"}, {"_id": 2, "t": 2}])
    assert code_of(coll, {"sortBy": {"t": 1}, "output": {"v": {"method": "linear"}}}) == 14
    coll.insert_one({"_id": 3, "t": 2, "v": 1})
    coll.update_one({"_id": 1}, {"$set": {"v": 0}})
    # Two documents share t=2: linear fill refuses repeated sort values.
    assert code_of(coll, {"sortBy": {"t": 1}, "output": {"v": {"method": "linear"}}}) == 6050106
    # locf takes any type.
    out = fill(coll, {"sortBy": {"t": 1, "_id": 1}, "output": {"v": {"method": "locf"}}})
    assert [d["v"] for d in out] == [0, 0, 1]


@pytest.mark.parametrize("spec, code", [
    ({"sortBy": {"t": 1}}, 40414),
    ({"output": {}}, 6050203),
    ({"output": {"v": 1}}, 6050200),
    ({"output": {"v": {"method": "locf", "value": 1}}}, 6050201),
    ({"output": {"v": {"method": "nearest"}}}, 6050202),
    ({"output": {"v": {"value": 1}}, "partitionBy": "$g", "partitionByFields": ["g"]}, 6050204),
    ({"output": {"v": {"method": "linear"}}}, 605001),
    ({"output": {"v": {"method": "linear"}}, "sortBy": {"a": 1, "b": 1}}, 605001),
    ({"output": {"v": {"value": 1}}, "foo": 1}, 40415),
    ({"output": {"v": {"value": 1}}, "partitionBy": 1}, 14),
])
def test_malformed_specs_fail_with_mongods_codes(coll, spec, code):
    coll.insert_one({"t": 1})
    assert code_of(coll, spec) == code
