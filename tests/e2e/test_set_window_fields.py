"""`$setWindowFields` through pymongo against the real binary: the manual's cake sales
(running totals per state), sliding document windows, numeric and date range windows, ranks
with ties, `$shift`, `$locf`/`$linearFill`, missing fields and mixed types, dotted outputs,
empty input, the stage memory limit, and mongod 7.0's codes for malformed specs. Expected
values are worked out by hand in the comments."""

from datetime import datetime

import pytest
from pymongo.errors import OperationFailure

CAKES = [
    {"_id": 0, "type": "chocolate", "orderDate": datetime(2020, 5, 18, 14, 10, 30),
     "state": "CA", "price": 13, "quantity": 120},
    {"_id": 1, "type": "chocolate", "orderDate": datetime(2021, 3, 20, 11, 30, 5),
     "state": "WA", "price": 14, "quantity": 140},
    {"_id": 2, "type": "vanilla", "orderDate": datetime(2021, 1, 11, 6, 31, 15),
     "state": "CA", "price": 12, "quantity": 145},
    {"_id": 3, "type": "vanilla", "orderDate": datetime(2020, 2, 8, 13, 13, 23),
     "state": "WA", "price": 13, "quantity": 104},
    {"_id": 4, "type": "strawberry", "orderDate": datetime(2019, 5, 18, 16, 9, 1),
     "state": "CA", "price": 41, "quantity": 162},
    {"_id": 5, "type": "strawberry", "orderDate": datetime(2019, 1, 8, 6, 12, 3),
     "state": "WA", "price": 43, "quantity": 134},
]


@pytest.fixture
def cakes(coll):
    coll.insert_many(CAKES)
    return coll


def window(coll, spec, **kwargs):
    return list(coll.aggregate([{"$setWindowFields": spec}], **kwargs))


def code_of(coll, spec, **kwargs):
    with pytest.raises(OperationFailure) as e:
        window(coll, spec, **kwargs)
    return e.value.code


def test_running_total_per_state_as_the_manual_shows(cakes):
    out = window(cakes, {
        "partitionBy": "$state", "sortBy": {"orderDate": 1},
        "output": {"cumulativeQuantityForState": {
            "$sum": "$quantity", "window": {"documents": ["unbounded", "current"]}}},
    })
    # CA by date: 162 (2019), 120 (2020), 145 (2021); WA: 134, 104, 140.
    assert [(d["_id"], d["cumulativeQuantityForState"]) for d in out] == [
        (4, 162), (0, 282), (2, 427), (5, 134), (3, 238), (1, 378)]


def test_sliding_average_and_whole_partition_extremes(cakes):
    out = window(cakes, {
        "partitionBy": "$state", "sortBy": {"orderDate": 1},
        "output": {
            "avg": {"$avg": "$quantity", "window": {"documents": [-1, 1]}},
            "most": {"$max": "$quantity"},
            "types": {"$push": "$type", "window": {"documents": [-1, 0]}},
        },
    })
    by_id = {d["_id"]: d for d in out}
    # CA: [162, 120, 145] -> (162+120)/2, (162+120+145)/3, (120+145)/2.
    assert by_id[4]["avg"] == 141.0
    assert by_id[0]["avg"] == pytest.approx(427 / 3)
    assert by_id[2]["avg"] == 132.5
    assert {by_id[i]["most"] for i in (4, 0, 2)} == {162}
    assert {by_id[i]["most"] for i in (5, 3, 1)} == {140}
    assert by_id[4]["types"] == ["strawberry"]
    assert by_id[0]["types"] == ["strawberry", "chocolate"]


def test_range_windows_over_numbers_and_dates(coll):
    coll.insert_many([{"_id": i, "t": t, "d": datetime(2024, 1, 1 + t)}
                      for i, t in enumerate([0, 1, 3, 4, 10])])
    out = window(coll, {"sortBy": {"t": 1}, "output": {
        "near": {"$push": "$t", "window": {"range": [-1, 1]}},
        "days": {"$count": {}, "window": {"range": [-3, "current"]}},
    }})
    assert [d["near"] for d in out] == [[0, 1], [0, 1], [3, 4], [3, 4], [10]]
    # The current document and those up to 3 below it: t=0 {0}, 1 {0,1}, 3 {0,1,3}, 4 {1,3,4}.
    assert [d["days"] for d in out] == [1, 2, 3, 3, 1]
    out = window(coll, {"sortBy": {"d": 1}, "output": {
        "week": {"$sum": "$t", "window": {"range": [-2, 0], "unit": "day"}}}})
    assert [d["week"] for d in out] == [0, 1, 4, 7, 10]
    # A date sort key without a unit, and a number with one, fail at run time.
    assert code_of(coll, {"sortBy": {"d": 1}, "output": {
        "x": {"$sum": 1, "window": {"range": [-1, 0]}}}}) == 5429413
    assert code_of(coll, {"sortBy": {"t": 1}, "output": {
        "x": {"$sum": 1, "window": {"range": [-1, 0], "unit": "day"}}}}) == 5429513


def test_ranks_with_ties_and_missing_keys(coll):
    coll.insert_many([{"_id": 1, "s": 30}, {"_id": 2, "s": 10}, {"_id": 3, "s": 10},
                      {"_id": 4}, {"_id": 5, "s": None}, {"_id": 6, "s": 20}])
    out = window(coll, {"sortBy": {"s": -1}, "output": {
        "rank": {"$rank": {}}, "dense": {"$denseRank": {}}, "n": {"$documentNumber": {}}}})
    # Descending: 30, 20, 10, 10, then null and missing (which tie).
    assert [(d["rank"], d["dense"], d["n"]) for d in out] == [
        (1, 1, 1), (2, 2, 2), (3, 3, 3), (3, 3, 4), (5, 4, 5), (5, 4, 6)]
    assert [d["_id"] for d in out][:2] == [1, 6]


def test_shift_locf_linear_fill_and_missing_fields(coll):
    coll.insert_many([{"_id": 1, "t": 1, "v": 10}, {"_id": 2, "t": 2},
                      {"_id": 3, "t": 3, "v": None}, {"_id": 4, "t": 4, "v": 40}])
    out = window(coll, {"sortBy": {"t": 1}, "output": {
        "prev": {"$shift": {"output": "$v", "by": -1, "default": "none"}},
        "carried": {"$locf": "$v"},
        "line": {"$linearFill": "$v"},
        "last.v": {"$last": "$v", "window": {"documents": [-1, 0]}},
    }})
    assert [d.get("prev", "unset") for d in out] == ["none", 10, "unset", None]
    assert [d["carried"] for d in out] == [10, 10, 10, 40]
    assert [d["line"] for d in out] == [10, 20.0, 30.0, 40]
    # `last.v` of a window ending at a document without v stays unset; its parent is made.
    assert [d["last"] for d in out] == [{"v": 10}, {}, {"v": None}, {"v": 40}]


def test_series_functions_over_time(coll):
    # A car's odometer: 0 km at 0 h, 50 at 1 h, 150 at 2 h, 150 at 4 h.
    coll.insert_many([{"_id": i, "at": datetime(2024, 1, 1, h), "h": h, "km": km}
                      for i, (h, km) in enumerate([(0, 0), (1, 50), (2, 150), (4, 150)])])
    out = window(coll, {"sortBy": {"at": 1}, "output": {
        "speed": {"$derivative": {"input": "$km", "unit": "hour"},
                  "window": {"documents": [-1, 0]}},
        "area": {"$integral": {"input": "$km", "unit": "hour"},
                 "window": {"documents": ["unbounded", "current"]}},
        "cov": {"$covariancePop": ["$h", "$km"]},
        "last2": {"$lastN": {"input": "$km", "n": 2}, "window": {"documents": ["unbounded", 0]}},
        "top2": {"$maxN": {"input": "$km", "n": 2}},
    }})
    # Rise over run per hour; the first window has one document, so no run.
    assert [d["speed"] for d in out] == [None, 50.0, 100.0, 0.0]
    # Trapezoids: 25, then + 100, then + 300.
    assert [d["area"] for d in out] == [0.0, 25.0, 125.0, 425.0]
    # h: 0 1 2 4 (mean 1.75); km: 0 50 150 150 (mean 87.5);
    # sum of products = 153.125 + 28.125 + 15.625 + 140.625 = 337.5; / 4.
    assert {d["cov"] for d in out} == {84.375}
    assert [d["last2"] for d in out] == [[0], [0, 50], [50, 150], [150, 150]]
    assert {tuple(d["top2"]) for d in out} == {(150, 150)}
    # Numbers as the sort key take no unit; dates need one.
    plain = window(coll, {"sortBy": {"h": 1}, "output": {
        "speed": {"$derivative": {"input": "$km"}, "window": {"documents": [-1, 0]}}}})
    assert [d["speed"] for d in plain] == [None, 50.0, 100.0, 0.0]
    assert code_of(coll, {"sortBy": {"at": 1}, "output": {
        "s": {"$derivative": {"input": "$km"}, "window": {"documents": [-1, 0]}}}}) == 5624901


def test_top_and_bottom_by_their_own_sort(cakes):
    out = window(cakes, {"partitionBy": "$state", "sortBy": {"orderDate": 1}, "output": {
        "dearest": {"$top": {"sortBy": {"price": -1}, "output": "$type"}},
        "cheapest2": {"$bottomN": {"n": 2, "sortBy": {"price": -1}, "output": "$price"},
                      "window": {"documents": ["unbounded", "current"]}},
    }})
    by_id = {d["_id"]: d for d in out}
    # CA prices by date: 41 (strawberry), 13, 12; WA: 43 (strawberry), 13, 14.
    assert {d["dearest"] for d in out} == {"strawberry"}
    assert [by_id[i]["cheapest2"] for i in (4, 0, 2)] == [[41], [41, 13], [13, 12]]
    assert [by_id[i]["cheapest2"] for i in (5, 3, 1)] == [[43], [43, 13], [14, 13]]


def test_a_large_partition_with_range_windows(coll):
    coll.insert_many([{"_id": i, "t": i // 2, "v": 1} for i in range(20000)])
    out = window(coll, {"sortBy": {"t": 1}, "output": {
        "seen": {"$sum": "$v", "window": {"range": ["unbounded", "current"]}},
        "near": {"$count": {}, "window": {"range": [-1, 1]}}}})
    assert len(out) == 20000
    # Two documents per t: t-1, t and t+1 hold six, fewer at the ends.
    assert out[10]["near"] == 6 and out[0]["near"] == 4 and out[-1]["near"] == 4
    # "current" is the current document's position, so ties are not yet counted.
    assert [d["seen"] for d in out[:4]] == [1, 2, 3, 4]


def test_dotted_outputs_go_where_add_fields_puts_them(coll):
    coll.insert_many([{"_id": 1, "a": [{"x": 1}, 5]}, {"_id": 2, "a": 7}, {"_id": 3}])
    out = window(coll, {"sortBy": {"_id": 1}, "output": {
        "a.n": {"$documentNumber": {}}, "a.gone": {"$first": "$nothing"}}})
    # Into each element of an array, over a scalar, and into a new sub-document; the
    # missing `$first` sets nothing but its parent is still made.
    assert [d["a"] for d in out] == [[{"x": 1, "n": 1}, {"n": 1}], {"n": 2}, {"n": 3}]


def test_mixed_types_and_empty_input(coll):
    assert window(coll, {"output": {"s": {"$sum": "$x"}}}) == []
    coll.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": "two"}, {"_id": 3, "x": 2.5},
                      {"_id": 4, "x": [7]}, {"_id": 5}])
    out = window(coll, {"sortBy": {"_id": 1}, "output": {
        "s": {"$sum": "$x"}, "lo": {"$min": "$x"}, "hi": {"$max": "$x"},
        "set": {"$addToSet": "$x", "window": {"documents": [0, 1]}}}})
    # $sum skips non-numbers; by MongoDB's order number < string < array.
    assert {d["s"] for d in out} == {3.5}
    assert {d["lo"] for d in out} == {1}
    assert out[0]["hi"] == [7]
    assert out[0]["set"] == [1, "two"]
    assert out[4]["set"] == []
    # A range window over a string sort value fails.
    assert code_of(coll, {"sortBy": {"x": 1}, "output": {
        "c": {"$count": {}, "window": {"range": [0, 1]}}}}) == 5429414


def test_partition_keys_missing_null_and_arrays(coll):
    coll.insert_many([{"_id": 1, "g": None, "x": 1}, {"_id": 2, "x": 2},
                      {"_id": 3, "g": "a", "x": 3}])
    out = window(coll, {"partitionBy": "$g", "output": {"n": {"$sum": "$x"}}})
    assert sorted((d["_id"], d["n"]) for d in out) == [(1, 3), (2, 3), (3, 3)]
    coll.insert_one({"_id": 4, "g": [1]})
    assert code_of(coll, {"partitionBy": "$g", "output": {"n": {"$sum": 1}}}) == 14


def test_collation_and_sub_pipelines(coll):
    coll.insert_many([{"_id": 1, "g": "a", "x": 1}, {"_id": 2, "g": "A", "x": 2},
                      {"_id": 3, "g": "b", "x": 4}])
    spec = {"partitionBy": "$g", "output": {"n": {"$sum": "$x"}}}
    # Under a strength-2 collation "a" and "A" are one partition.
    out = window(coll, spec, collation={"locale": "en", "strength": 2})
    assert sorted((d["_id"], d["n"]) for d in out) == [(1, 3), (2, 3), (3, 4)]
    out = window(coll, spec)
    assert sorted((d["_id"], d["n"]) for d in out) == [(1, 1), (2, 2), (3, 4)]
    faceted = list(coll.aggregate([{"$facet": {"w": [{"$setWindowFields": {
        "sortBy": {"_id": 1}, "output": {"r": {"$documentNumber": {}}}}}]}}]))
    assert [d["r"] for d in faceted[0]["w"]] == [1, 2, 3]


def test_memory_limit_refuses_as_the_other_blocking_stages(coll):
    admin = coll.database.client.admin
    name = "internalQueryMaxBlockingSortMemoryUsageBytes"
    before = admin.command("getParameter", 1, **{name: 1})[name]
    coll.insert_many([{"_id": i, "pad": "p" * 200} for i in range(500)])
    admin.command("setParameter", 1, **{name: 16 * 1024})
    try:
        spec = {"sortBy": {"_id": 1}, "output": {"s": {"$push": "$pad"}}}
        assert code_of(coll, spec, allowDiskUse=False) == 292
        assert code_of(coll, spec) == 146
    finally:
        admin.command("setParameter", 1, **{name: before})


@pytest.mark.parametrize("spec, code", [
    ({}, 40414),
    ({"output": {}, "foo": 1}, 40415),
    ({"output": 1}, 14),
    ({"output": {"a": {"$sum": 1}, "a.b": {"$sum": 1}}}, 6307900),
    ({"output": {"a": {"$summ": 1}}}, 9),
    ({"output": {"a": 1}}, 9),
    ({"output": {"a": {"$sum": 1, "window": {"documents": [-1, 0]}}}}, 5339901),
    ({"sortBy": {"x": 1}, "output": {"a": {"$sum": 1, "window": {"documents": [1, 0]}}}},
     5339900),
    ({"sortBy": {"x": 1, "y": 1}, "output": {"a": {"$sum": 1, "window": {"range": [0, 1]}}}},
     5339902),
    ({"output": {"a": {"$rank": {}}}}, 5371602),
    ({"sortBy": {"x": 1}, "output": {"a": {"$rank": 1}}}, 5371603),
    ({"output": {"a": {"$shift": {"output": "$x", "by": 1}}}}, 9),
    ({"output": {"a": {"$linearFill": "$x"}}}, 605001),
    ({"sortBy": {"x": 1}, "output": {"a": {"$derivative": {"input": "$x"}}}}, 9),
    ({"sortBy": {"x": 1}, "output": {"a": {"$integral": {"input": "$x", "unit": "month"}}}},
     5490710),
    ({"output": {"a": {"$minN": {"input": "$x", "n": 0}}}}, 5787908),
    ({"output": {"a": {"$firstN": {"input": "$x"}}}}, 5787906),
    ({"output": {"a": {"$topN": {"n": 1, "output": "$x"}}}}, 5788005),
    ({"output": {"a": {"$median": {"input": "$x", "method": "approximate"}}}}, 238),
])
def test_malformed_specs_fail_with_mongods_codes(coll, spec, code):
    coll.insert_one({"x": 1})
    assert code_of(coll, spec) == code
