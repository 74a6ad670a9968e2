"""The date, arithmetic, set and array aggregation expressions through pymongo against the
real binary: date parts in UTC, an offset and a DST zone, `$dateToString`/`$dateFromString`
(with `onNull`/`onError`), `$dateToParts`/`$dateFromParts`, `$dateAdd`/`$dateDiff`/
`$dateTrunc`, numeric types of `$round`/`$pow`/`$sum`, sets, `$range`/`$zip`/`$sortArray`/
`$firstN`, and MongoDB 7.0's codes for their runtime errors (28714, 34443, 241, 40485,
FailedToParse 9 for an unknown `$dateAdd` unit)."""

from datetime import datetime, timezone

import pytest
from bson import Int64
from pymongo.errors import OperationFailure

# 2017-07-04T14:56:42.911Z, a Tuesday; New York is on EDT (-4), London on BST (+1).
SUMMER = datetime(2017, 7, 4, 14, 56, 42, 911000, tzinfo=timezone.utc)
# 2017-01-04T12:00:00Z: New York is on EST (-5).
WINTER = datetime(2017, 1, 4, 12, 0, 0, tzinfo=timezone.utc)


@pytest.fixture
def doc(coll):
    coll.insert_one({"_id": 1, "d": SUMMER, "w": WINTER, "n": None, "a": [1, 2, 3, 5, 7, 9]})
    return coll


def project(coll, expression):
    got = list(coll.aggregate([{"$addFields": {"v": expression}}, {"$project": {"_id": 0, "v": 1}}]))
    return got[0].get("v", "MISSING")


def fails(coll, expression):
    with pytest.raises(OperationFailure) as err:
        project(coll, expression)
    return err.value.code


def utc(*parts):
    return datetime(*parts, tzinfo=timezone.utc).replace(tzinfo=None)


def test_date_parts_in_zones(doc):
    assert project(doc, {"$year": "$d"}) == 2017
    assert project(doc, {"$dayOfWeek": "$d"}) == 3
    assert project(doc, {"$isoWeekYear": "$d"}) == Int64(2017)
    assert project(doc, {"$hour": {"date": "$d", "timezone": "America/New_York"}}) == 10
    assert project(doc, {"$hour": {"date": "$w", "timezone": "America/New_York"}}) == 7
    assert project(doc, {"$minute": {"date": "$d", "timezone": "+05:30"}}) == 26
    assert project(doc, {"$month": "$n"}) is None
    assert fails(doc, {"$hour": {"date": "$d", "timezone": "Mars/Base"}}) == 40485


def test_date_to_and_from_string(doc):
    fmt = "%Y-%m-%d %H:%M:%S %z (%Z minutes)"
    got = project(doc, {"$dateToString": {"date": "$d", "format": fmt, "timezone": "Europe/London"}})
    assert got == "2017-07-04 15:56:42 +0100 (60 minutes)"
    assert project(doc, {"$dateToString": {"date": "$d"}}) == "2017-07-04T14:56:42.911Z"
    assert project(doc, {"$dateToString": {"date": "$n", "onNull": "none"}}) == "none"
    parsed = project(doc, {"$dateFromString": {"dateString": "2017-07-04T10:56:42.911",
                                               "timezone": "America/New_York"}})
    assert parsed == SUMMER.replace(tzinfo=None)
    assert project(doc, {"$dateFromString": {"dateString": "04/07/2017",
                                             "format": "%d/%m/%Y"}}) == utc(2017, 7, 4)
    assert project(doc, {"$dateFromString": {"dateString": "nope", "onError": "bad"}}) == "bad"
    assert fails(doc, {"$dateFromString": {"dateString": "nope"}}) == 241


def test_date_parts_documents(doc):
    parts = project(doc, {"$dateToParts": {"date": "$d", "timezone": "America/New_York"}})
    assert parts == {"year": 2017, "month": 7, "day": 4, "hour": 10, "minute": 56,
                     "second": 42, "millisecond": 911}
    made = project(doc, {"$dateFromParts": {"year": 2016, "month": 14, "day": 0}})
    assert made == utc(2017, 1, 31)


def test_date_arithmetic(doc):
    added = project(doc, {"$dateAdd": {"startDate": utc(2020, 10, 31, 12), "unit": "month",
                                       "amount": 1}})
    assert added == utc(2020, 11, 30, 12)
    dst = project(doc, {"$dateAdd": {"startDate": utc(2020, 11, 1, 5, 50, 2), "unit": "day",
                                     "amount": 1, "timezone": "America/New_York"}})
    assert dst == utc(2020, 11, 2, 6, 50, 2)
    diff = project(doc, {"$dateDiff": {"startDate": utc(2020, 12, 31, 23), "endDate": utc(2021, 1, 1, 1),
                                       "unit": "year"}})
    assert diff == Int64(1)
    trunc = project(doc, {"$dateTrunc": {"date": "$d", "unit": "week", "startOfWeek": "monday"}})
    assert trunc == utc(2017, 7, 3)
    assert fails(doc, {"$dateAdd": {"startDate": "$d", "unit": "fortnight", "amount": 1}}) == 9


def test_numeric_results_keep_mongods_types(doc):
    assert project(doc, {"$round": [2.5, 0]}) == 2.0
    assert project(doc, {"$round": [1255, -1]}) == 1260
    assert project(doc, {"$trunc": [-7.89, 1]}) == -7.8
    assert project(doc, {"$pow": [2, 40]}) == Int64(1 << 40)
    assert project(doc, {"$sum": "$a"}) == 27
    assert project(doc, {"$avg": [1, 2]}) == 1.5
    assert project(doc, {"$sqrt": 16}) == 4.0
    assert project(doc, {"$cos": 0}) == 1.0
    assert fails(doc, {"$sqrt": -1}) == 28714
    assert fails(doc, {"$acos": 2}) == 50989


def test_sets_and_arrays(doc):
    assert project(doc, {"$setUnion": [[3, 1], [2, 1]]}) == [1, 2, 3]
    assert project(doc, {"$setIsSubset": [[1], "$a"]}) is True
    assert project(doc, {"$allElementsTrue": [[1, 0]]}) is False
    assert project(doc, {"$slice": ["$a", -2]}) == [7, 9]
    assert project(doc, {"$last": "$a"}) == 9
    assert project(doc, {"$indexOfArray": ["$a", 5]}) == 3
    assert project(doc, {"$range": [0, 10, 4]}) == [0, 4, 8]
    assert project(doc, {"$zip": {"inputs": [[1, 2], ["x"]]}}) == [[1, "x"]]
    assert project(doc, {"$arrayToObject": [[["k", 1]]]}) == {"k": 1}
    assert project(doc, {"$sortArray": {"input": [3, 1, 2], "sortBy": -1}}) == [3, 2, 1]
    assert project(doc, {"$maxN": {"n": 2, "input": "$a"}}) == [9, 7]
    assert fails(doc, {"$range": [None, 2]}) == 34443


def test_slice_expression_in_project_and_find(coll):
    # `$slice` is the expression in `$project`; a find projection's `$slice` keeps its
    # `[skip, limit]` form (31257 for a non-number skip).
    coll.insert_one({"_id": "s", "a": [1, 3, 5, 7, 9]})
    got = list(coll.aggregate([{"$match": {"_id": "s"}},
                               {"$project": {"_id": 0, "v": {"$slice": ["$a", 1, 2]}}}]))
    assert got == [{"v": [3, 5]}]
    with pytest.raises(OperationFailure) as e:
        coll.find_one({"_id": "s"}, {"_id": 0, "v": {"$slice": ["$a", -2]}})
    assert e.value.code == 31257
    assert coll.find_one({"_id": "s"}, {"_id": 0, "a": {"$slice": [1, 2]}}) == {"a": [3, 5]}
