"""String, regex and conversion expressions through pymongo's aggregate against the real
binary: `$substrBytes $substrCP $strLenBytes $split $indexOfBytes $indexOfCP $strcasecmp
$trim $ltrim $rtrim $replaceOne $replaceAll`, `$regexMatch $regexFind $regexFindAll`,
`$convert` (onError, onNull) and its `$to*` shorthands, `$isNumber`, with null and missing
inputs and mongod's codes for wrong types.

Expected results are what mongod 7.0 returns: the examples of the MongoDB manual pages of each
operator and facts of mongod's jstests (`jstests/aggregation/expressions/split.js`,
`indexof_codepoints.js`, `trim.js`, `regex_find.js`, `convert.js`)."""

import datetime

import pytest
from bson import Decimal128, Int64, ObjectId
from pymongo.errors import OperationFailure


def project(coll, expression, doc=None):
    """The value of `expression` over one document (`doc`, or `{}`)."""
    coll.delete_many({})
    coll.insert_one(dict(doc or {}, _id=1))
    out = list(coll.aggregate([{"$project": {"_id": 0, "v": expression}}]))
    return out[0].get("v", "MISSING")


def code_of(coll, expression, doc=None):
    with pytest.raises(OperationFailure) as err:
        project(coll, expression, doc)
    return err.value.code


def test_substrings_and_lengths(coll):
    doc = {"s": "cafétéria"}
    assert project(coll, {"$substrCP": ["$s", 0, 5]}, doc) == "cafét"
    assert project(coll, {"$substrBytes": ["$s", 0, 3]}, doc) == "caf"
    assert project(coll, {"$substr": ["$s", 5, -1]}, doc) == "téria"
    assert project(coll, {"$strLenBytes": "$s"}, doc) == 11
    assert project(coll, {"$strLenCP": "$s"}, doc) == 9
    assert project(coll, {"$substrCP": ["$missing", 0, 1]}, doc) == ""
    assert code_of(coll, {"$substrBytes": ["$s", 0, 4]}, doc) == 28657
    assert code_of(coll, {"$substrCP": ["$s", 1.5, 1]}, doc) == 34451
    assert code_of(coll, {"$strLenBytes": "$missing"}, doc) == 34473


def test_split_index_of_and_strcasecmp(coll):
    doc = {"city": "Hanover, NH", "s": "∫aƒ"}
    assert project(coll, {"$split": ["$city", ", "]}, doc) == ["Hanover", "NH"]
    assert project(coll, {"$split": ["$missing", ","]}, doc) is None
    assert code_of(coll, {"$split": ["$city", ""]}, doc) == 40087
    assert code_of(coll, {"$split": [1, ","]}, doc) == 40085
    assert project(coll, {"$indexOfCP": ["$s", "ƒ"]}, doc) == 2
    assert project(coll, {"$indexOfBytes": ["$s", "ƒ"]}, doc) == 4
    assert project(coll, {"$indexOfBytes": ["$city", "o", 3]}, doc) == 3
    assert project(coll, {"$indexOfCP": ["$missing", "a"]}, doc) is None
    assert code_of(coll, {"$indexOfCP": ["$city", "a", -1]}, doc) == 40097
    assert project(coll, {"$strcasecmp": ["$city", "HANOVER, nh"]}, doc) == 0
    assert project(coll, {"$strcasecmp": ["a", "B"]}, doc) == -1


def test_trim_and_replace(coll):
    doc = {"s": "  ggggoodbyeeeee\n", "t": "blue paint with blue paintbrush"}
    assert project(coll, {"$trim": {"input": "$s"}}, doc) == "ggggoodbyeeeee"
    assert project(coll, {"$ltrim": {"input": "$s", "chars": " g"}}, doc) == "oodbyeeeee\n"
    assert project(coll, {"$rtrim": {"input": "$s", "chars": "e\n"}}, doc) == "  ggggoodby"
    assert project(coll, {"$trim": {"input": "$missing"}}, doc) is None
    assert code_of(coll, {"$trim": {"input": 1}}, doc) == 50699
    replace = {"input": "$t", "find": "blue paint", "replacement": "red paint"}
    assert project(coll, {"$replaceOne": replace}, doc) == "red paint with blue paintbrush"
    assert project(coll, {"$replaceAll": replace}, doc) == "red paint with red paintbrush"
    assert code_of(coll, {"$replaceAll": {"input": "$t", "find": 1, "replacement": ""}}, doc) == 51745
    assert code_of(coll, {"$replaceOne": {"input": "$t"}}, doc) == 51748


def test_regex_operators(coll):
    doc = {"d": "Single LINE description.", "e": "café e"}
    assert project(coll, {"$regexMatch": {"input": "$d", "regex": "line", "options": "i"}}, doc) is True
    assert project(coll, {"$regexMatch": {"input": "$missing", "regex": "x"}}, doc) is False
    found = project(coll, {"$regexFind": {"input": "$d", "regex": "(L)(I)?NE"}}, doc)
    assert found == {"match": "LINE", "idx": 7, "captures": ["L", "I"]}
    all_e = project(coll, {"$regexFindAll": {"input": "$e", "regex": "e"}}, doc)
    assert [m["idx"] for m in all_e] == [5]
    all_accented = project(coll, {"$regexFindAll": {"input": "$e", "regex": "[eé]"}}, doc)
    assert [m["idx"] for m in all_accented] == [3, 5]
    assert project(coll, {"$regexFindAll": {"input": None, "regex": "a"}}, doc) == []
    assert code_of(coll, {"$regexMatch": {"input": 1, "regex": "a"}}, doc) == 51104
    assert code_of(coll, {"$regexFind": {"input": "$d", "regex": "a", "options": "g"}}, doc) == 51108
    assert code_of(coll, {"$regexFind": {"input": "$d", "regex": "("}}, doc) == 51111
    assert code_of(coll, {"$regexFindAll": {"input": "$d"}}, doc) == 31023


def test_convert_and_shorthands(coll):
    doc = {"p": "10.5", "q": "5", "n": None, "oid": "5ab9cbfa31c2ab715d42129e"}
    assert project(coll, {"$toDouble": "$p"}, doc) == 10.5
    assert project(coll, {"$toInt": "$q"}, doc) == 5
    assert project(coll, {"$toLong": "$q"}, doc) == Int64(5)
    assert project(coll, {"$toDecimal": 2.5}, doc) == Decimal128("2.50000000000000")
    assert project(coll, {"$toString": 1.5}, doc) == "1.5"
    assert project(coll, {"$toBool": ""}, doc) is True
    assert project(coll, {"$toObjectId": "$oid"}, doc) == ObjectId("5ab9cbfa31c2ab715d42129e")
    date = project(coll, {"$toDate": "2018-03-27T16:58:51.538Z"}, doc)
    assert date == datetime.datetime(2018, 3, 27, 16, 58, 51, 538000)
    onerr = {"$convert": {"input": "$p", "to": "int", "onError": "bad", "onNull": "none"}}
    assert project(coll, onerr, doc) == "bad"
    onnull = {"$convert": {"input": "$n", "to": "int", "onError": "bad", "onNull": "none"}}
    assert project(coll, onnull, doc) == "none"
    assert project(coll, {"$convert": {"input": "$q", "to": 18}}, doc) == Int64(5)
    assert code_of(coll, {"$toInt": "$p"}, doc) == 241
    assert code_of(coll, {"$convert": {"input": 1, "to": "date"}}, doc) == 241
    assert code_of(coll, {"$convert": {"input": 1, "to": "foo", "onError": 0}}, doc) == 2
    assert code_of(coll, {"$toInt": [1, 2]}, doc) == 50723
    assert project(coll, {"$isNumber": "$q"}, doc) is False
    assert project(coll, {"$isNumber": Decimal128("1")}, doc) is True


def test_error_message_is_mongods(coll):
    with pytest.raises(OperationFailure) as err:
        project(coll, {"$toInt": "12abc"})
    assert err.value.code == 241
    assert "Failed to parse number '12abc' in $convert with no onError value: " \
        "Did not consume whole string." in str(err.value)
