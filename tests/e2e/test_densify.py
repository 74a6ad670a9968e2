"""`$densify` through pymongo against the real binary: hourly readings filled over an
explicit date range (the manual's weather example, upper bound excluded), numbers filled per
partition and over the full range, off-grid values, null and missing fields passing through,
empty input, mixed types, and mongod 7.0's codes for malformed specs. Expected values are
worked out by hand in the comments."""

from datetime import datetime

import pytest
from pymongo.errors import OperationFailure


def densify(coll, spec, *rest):
    return list(coll.aggregate([{"$densify": spec}, *rest]))


def code_of(coll, spec):
    with pytest.raises(OperationFailure) as e:
        densify(coll, spec)
    return e.value.code


def test_hourly_readings_over_an_explicit_range(coll):
    coll.insert_many([
        {"metadata": {"sensorId": 5578}, "timestamp": datetime(2021, 5, 18, 0), "temp": 12},
        {"metadata": {"sensorId": 5578}, "timestamp": datetime(2021, 5, 18, 4), "temp": 11},
        {"metadata": {"sensorId": 5578}, "timestamp": datetime(2021, 5, 18, 8), "temp": 11},
        {"metadata": {"sensorId": 5578}, "timestamp": datetime(2021, 5, 18, 12), "temp": 12},
    ])
    out = densify(coll, {"field": "timestamp", "range": {
        "step": 1, "unit": "hour",
        "bounds": [datetime(2021, 5, 18, 0), datetime(2021, 5, 18, 8)]}})
    # Hours 0..7 exist or are made (8 excluded as a bound, but its reading is kept), then 12.
    assert [d["timestamp"].hour for d in out] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 12]
    made = [d for d in out if "temp" not in d]
    assert [d["timestamp"].hour for d in made] == [1, 2, 3, 5, 6, 7]
    assert all(set(d) == {"timestamp"} for d in made)


def test_partitions_alone_and_over_the_full_range(coll):
    coll.insert_many([
        {"variety": "Arabica", "altitude": 600}, {"variety": "Arabica", "altitude": 750},
        {"variety": "Arabica", "altitude": 950}, {"variety": "Gesha", "altitude": 1700},
        {"variety": "Gesha", "altitude": 1850},
    ])
    per = densify(coll, {"field": "altitude", "partitionByFields": ["variety"],
                         "range": {"step": 200, "bounds": "partition"}})
    got = sorted((d["variety"], d["altitude"]) for d in per)
    # Arabica's grid from 600: 800 is new (750 and 950 are off it); Gesha's from 1700: none.
    assert got == [("Arabica", 600), ("Arabica", 750), ("Arabica", 800), ("Arabica", 950),
                   ("Gesha", 1700), ("Gesha", 1850)]
    full = densify(coll, {"field": "altitude", "partitionByFields": ["variety"],
                          "range": {"step": 200, "bounds": "full"}})
    grid = list(range(600, 1850, 200))  # 600 .. 1800; 1850 is off the grid
    for variety, have in [("Arabica", {600, 750, 950}), ("Gesha", {1700, 1850})]:
        values = sorted(d["altitude"] for d in full if d["variety"] == variety)
        assert values == sorted(have | set(grid))
    made = [d for d in full if "_id" not in d]
    assert all(set(d) == {"variety", "altitude"} for d in made)


def test_nulls_pass_through_and_empty_input(coll):
    assert densify(coll, {"field": "x", "range": {"step": 1, "bounds": "full"}}) == []
    # With an explicit range and no input, the whole range is made.
    made = densify(coll, {"field": "x", "range": {"step": 0.5, "bounds": [1.0, 3.0]}})
    assert [d["x"] for d in made] == [1.0, 1.5, 2.0, 2.5]
    coll.insert_many([{"_id": 1, "x": None}, {"_id": 2}, {"_id": 3, "x": 1}, {"_id": 4, "x": 4}])
    out = densify(coll, {"field": "x", "range": {"step": 1, "bounds": "full"}})
    assert sorted(d["_id"] for d in out if "_id" in d) == [1, 2, 3, 4]
    assert [d["x"] for d in out if "x" in d and d["x"] is not None] == [1, 2, 3, 4]
    assert [d for d in out if "_id" not in d] == [{"x": 2}, {"x": 3}]


def test_mixed_types_fail_at_run_time(coll):
    coll.insert_many([{"x": 1}, {"x": "two"}])
    assert code_of(coll, {"field": "x", "range": {"step": 1, "bounds": "full"}}) == 5733201
    coll.delete_many({})
    coll.insert_many([{"x": 1}, {"x": datetime(2024, 1, 1)}])
    assert code_of(coll, {"field": "x", "range": {"step": 1, "bounds": "full"}}) == 6053601
    assert code_of(coll, {"field": "x", "range": {"step": 1, "unit": "day",
                                                  "bounds": "full"}}) == 6053600


@pytest.mark.parametrize("spec, code", [
    ({"range": {"step": 1, "bounds": "full"}}, 40414),
    ({"field": "x"}, 40414),
    ({"field": "x", "range": {"step": 1, "bounds": "full"}, "foo": 1}, 40415),
    ({"field": 1, "range": {"step": 1, "bounds": "full"}}, 14),
    ({"field": "x", "range": {"step": 0, "bounds": "full"}}, 5733401),
    ({"field": "x", "range": {"step": 1.5, "unit": "day", "bounds": "full"}}, 6586400),
    ({"field": "x", "range": {"step": 1, "bounds": [1]}}, 5733403),
    ({"field": "x", "range": {"step": 1, "bounds": [2, 1]}}, 5733402),
    ({"field": "x", "range": {"step": 1, "unit": "day", "bounds": [1, 2]}}, 5733409),
    ({"field": "x", "range": {"step": 1, "bounds": [1, 2.5]}}, 5876900),
    ({"field": "x", "range": {"step": 1, "bounds": [datetime(2024, 1, 1),
                                                    datetime(2024, 1, 2)]}}, 5733410),
    ({"field": "x", "range": {"step": 1, "bounds": "most"}}, 5946802),
    ({"field": "x", "range": {"step": 1, "bounds": 7}}, 5733404),
    ({"field": "x", "range": {"step": 1, "bounds": "partition"}}, 5733408),
])
def test_malformed_specs_fail_with_mongods_codes(coll, spec, code):
    coll.insert_one({"x": 1})
    assert code_of(coll, spec) == code
