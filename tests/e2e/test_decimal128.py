"""decimal128 through pymongo against the real binary, as mongod 7.0 answers: arithmetic and
numeric expressions give decimals (with mongod's double conversions: 15 significant digits,
34 for a running `$add` total), `$sum`/`$avg` widen to decimal, `$stdDev*` stay doubles,
`$inc`/`$mul` store decimals, `$toDecimal` values flow through, and comparisons, `$min`/`$max`
and sorts order decimals exactly against doubles (`NumberDecimal("0.1") < 0.1`), with and
without an index."""

import pytest
from bson import Decimal128, Int64
from pymongo.errors import OperationFailure

D = Decimal128


def project(coll, expression):
    got = list(coll.aggregate([{"$project": {"_id": 0, "v": expression}}]))
    return got[0].get("v", "MISSING")


def same(got, want):
    """Same type and same bytes (so `1.50` and `1.5` differ, as mongod's do)."""
    assert type(got) is type(want), (got, want)
    if isinstance(want, Decimal128):
        assert got.bid == want.bid, (str(got), str(want))
    else:
        assert got == want


@pytest.fixture
def agg(coll):
    coll.insert_one({"_id": 1})
    return coll


@pytest.mark.parametrize(
    "expression, want",
    [
        ({"$add": [1, D("2.5")]}, D("3.5")),
        ({"$add": [D("0.1"), D("0.2")]}, D("0.3")),
        ({"$add": [0.1, D("0")]}, D("0.1000000000000000055511151231257827")),
        ({"$add": [D("0"), 0.1]}, D("0.100000000000000")),
        ({"$subtract": [D("5"), 0.5]}, D("4.500000000000000")),
        ({"$multiply": [2, D("1.5")]}, D("3.0")),
        ({"$divide": [D("1"), 3]}, D("0.3333333333333333333333333333333333")),
        ({"$divide": [D("2"), 3]}, D("0.6666666666666666666666666666666667")),
        ({"$mod": [D("7.5"), 2]}, D("1.5")),
        ({"$abs": D("-1.50")}, D("1.50")),
        ({"$ceil": D("1.1")}, D("2")),
        ({"$floor": D("-1.1")}, D("-2")),
        ({"$round": [D("2.675"), 2]}, D("2.68")),
        ({"$round": [D("2.665"), 2]}, D("2.66")),
        ({"$round": [D("1234"), -2]}, D("1.2E+3")),
        ({"$round": [D("7"), 2]}, D("7.00")),
        ({"$trunc": [D("-2.679"), 2]}, D("-2.67")),
        ({"$sqrt": D("2.25")}, D("1.5")),
        ({"$sqrt": D("2")}, D("1.414213562373095048801688724209698")),
        ({"$exp": D("0")}, D("1")),
        ({"$ln": D("1")}, D("0")),
        ({"$log10": D("1E+5")}, D("5")),
        ({"$log": [D("100"), 10]}, D("2")),
        ({"$pow": [D("1.5"), 2]}, D("2.25")),
        ({"$pow": [2, D("-2")]}, D("0.25")),
        ({"$add": [D("NaN"), 1]}, D("NaN")),
        ({"$multiply": [D("-0"), 5]}, D("-0")),
        ({"$add": [D("Infinity"), D("-Infinity")]}, D("NaN")),
        ({"$add": [{"$toDecimal": 2.5}, 1]}, D("3.50000000000000")),
        ({"$sin": D("1")}, D("0.8414709848078965066525023216302990")),
        ({"$acos": D("-1")}, D("3.141592653589793238462643383279503")),
        ({"$degreesToRadians": D("180")}, D("3.141592653589793238462643383279503")),
        ({"$atan2": [D("1"), -1]}, D("2.356194490192344928846982537459627")),
        ({"$tanh": D("1")}, D("0.7615941559557648881194582826047936")),
        ({"$arrayElemAt": [[10, 20, 30], D("1")]}, 20),
        ({"$sum": [1, D("2.5"), Int64(3)]}, D("6.5")),
        ({"$avg": [1, 2, D("3")]}, D("2")),
        ({"$stdDevPop": [D("1"), D("3")]}, 1.0),
        ({"$max": [D("0.1"), 0.1]}, 0.1),
        ({"$min": [D("0.1"), 0.1]}, D("0.1")),
        ({"$lt": [D("0.1"), 0.1]}, True),
        ({"$eq": [D("5.00"), 5]}, True),
        ({"$cmp": [D("0.3"), 0.3]}, 1),
    ],
)
def test_expressions(agg, expression, want):
    same(project(agg, expression), want)


@pytest.mark.parametrize(
    "expression, code",
    [
        ({"$divide": [1, D("0")]}, 16608),
        ({"$mod": [D("1"), 0]}, 16610),
        ({"$sqrt": D("-1")}, 28714),
        ({"$ln": D("0")}, 28766),
        ({"$log": [D("8"), 1]}, 28759),
        ({"$pow": [D("0"), -1]}, 28764),
        ({"$add": [D("1"), "x"]}, 16554),
        ({"$acos": D("2")}, 50989),
    ],
)
def test_expression_errors(agg, expression, code):
    with pytest.raises(OperationFailure) as err:
        project(agg, expression)
    assert err.value.code == code


def test_group_accumulators(coll):
    coll.insert_many(
        [
            {"g": 1, "x": 1},
            {"g": 1, "x": D("2.5")},
            {"g": 1, "x": "not a number"},
            {"g": 2, "x": D("1")},
            {"g": 2, "x": D("3")},
            {"g": 3, "x": 2},
            {"g": 3, "x": 4},
        ]
    )
    got = {
        d["_id"]: d
        for d in coll.aggregate(
            [
                {
                    "$group": {
                        "_id": "$g",
                        "sum": {"$sum": "$x"},
                        "avg": {"$avg": "$x"},
                        "sd": {"$stdDevPop": "$x"},
                        "min": {"$min": "$x"},
                    }
                }
            ]
        )
    }
    same(got[1]["sum"], D("3.5"))
    same(got[1]["avg"], D("1.75"))
    same(got[2]["sum"], D("4"))
    same(got[2]["avg"], D("2"))
    same(got[2]["sd"], 1.0)
    same(got[2]["min"], D("1"))
    # No decimal in the group: the types stay as they were.
    same(got[3]["sum"], 6)
    same(got[3]["avg"], 3.0)


def test_inc_and_mul_store_decimals(coll):
    coll.insert_one({"_id": 1, "a": D("1.10"), "b": 2, "c": 0.5})
    coll.update_one(
        {"_id": 1},
        {"$inc": {"a": 2, "b": D("0.5"), "new": D("1.0")}, "$mul": {"c": D("3"), "none": D("2.50")}},
    )
    doc = coll.find_one({"_id": 1})
    same(doc["a"], D("3.10"))
    same(doc["b"], D("2.5"))
    same(doc["new"], D("1.0"))
    # The double 0.5 converts to 15 digits before the multiplication.
    same(doc["c"], D("1.500000000000000"))
    same(doc["none"], D("0.00"))
    coll.update_one({"_id": 1}, {"$mul": {"a": 0.1}})
    same(coll.find_one({"_id": 1})["a"], D("0.31000000000000000"))


def test_update_min_max_compare_exactly(coll):
    coll.insert_one({"_id": 1, "lo": 0.1, "hi": 0.1})
    coll.update_one({"_id": 1}, {"$min": {"lo": D("0.1")}, "$max": {"hi": D("0.1")}})
    doc = coll.find_one({"_id": 1})
    same(doc["lo"], D("0.1"))
    same(doc["hi"], 0.1)


@pytest.mark.parametrize("indexed", [False, True])
def test_matcher_compares_decimals_exactly(coll, indexed):
    if indexed:
        coll.create_index("v")
    coll.insert_many(
        [
            {"_id": 1, "v": D("0.1")},
            {"_id": 2, "v": 0.1},
            {"_id": 3, "v": D("0.1000000000000000055511151231257828")},
            {"_id": 4, "v": 5},
            {"_id": 5, "v": D("5.0")},
            {"_id": 6, "v": D("NaN")},
            {"_id": 7, "v": Int64(9007199254740993)},
            {"_id": 8, "v": D("9007199254740993")},
        ]
    )

    def ids(flt):
        return sorted(d["_id"] for d in coll.find(flt, {"_id": 1}))

    assert ids({"v": {"$lt": 0.1}}) == [1]
    assert ids({"v": {"$lte": 0.1}}) == [1, 2]
    assert ids({"v": {"$gt": 0.1, "$lt": 1}}) == [3]
    assert ids({"v": 0.1}) == [2]
    assert ids({"v": D("0.1")}) == [1]
    assert ids({"v": {"$gte": D("0.1"), "$lt": 0.1}}) == [1]
    assert ids({"v": 5}) == [4, 5]
    assert ids({"v": D("5")}) == [4, 5]
    assert ids({"v": D("NaN")}) == [6]
    assert ids({"v": Int64(9007199254740993)}) == [7, 8]
    assert ids({"v": {"$gt": 9007199254740992.0}}) == [7, 8]


def test_sort_orders_decimals_exactly(coll):
    coll.insert_many(
        [
            {"_id": 1, "v": 0.1},
            {"_id": 2, "v": D("0.1")},
            {"_id": 3, "v": D("0.1000000000000000055511151231257828")},
            {"_id": 4, "v": D("-Infinity")},
            {"_id": 5, "v": D("NaN")},
            {"_id": 6, "v": 1},
        ]
    )
    got = [d["_id"] for d in coll.find({}, {"_id": 1}).sort([("v", 1), ("_id", 1)])]
    assert got == [5, 4, 2, 1, 3, 6]
    got = [d["_id"] for d in coll.aggregate([{"$sort": {"v": -1, "_id": 1}}])]
    assert got == [6, 3, 1, 2, 4, 5]
