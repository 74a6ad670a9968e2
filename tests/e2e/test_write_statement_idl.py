"""A write statement mongod 7.0's IDL parser refuses (`UpdateOpEntry`, `DeleteOpEntry` in
write_ops.idl: a field of the wrong type, missing, unknown) fails the whole `update` or
`delete` command with the parser's code and message, before any statement runs, as mongod
parses the command before it writes; an error in a statement's meaning (an update operator)
stays that statement's write error."""

import pytest
from pymongo.errors import OperationFailure


def refused(db, command, field, statements, **args):
    with pytest.raises(OperationFailure) as err:
        db.command(command, "c", **{field: statements}, **args)
    return err.value.code, err.value.details["errmsg"]


def test_update_statement_of_the_wrong_type_fails_the_command_before_any_write(db):
    db.c.insert_many([{"_id": 1}, {"_id": 2}])
    good = {"q": {"_id": 1}, "u": {"$set": {"a": 1}}}
    cases = [
        ({"q": {}, "u": {}, "multi": "yes"}, 14,
         "BSON field 'update.updates.multi' is the wrong type 'string', expected type 'bool'"),
        ({"q": {}, "u": {}, "upsert": 1.5}, 14,
         "BSON field 'update.updates.upsert' is the wrong type 'double', expected type 'bool'"),
        ({"q": 5, "u": {}}, 14,
         "BSON field 'update.updates.q' is the wrong type 'int', expected type 'object'"),
        ({"u": {}}, 40414, "BSON field 'update.updates.q' is missing but a required field"),
        ({"q": {}}, 40414, "BSON field 'update.updates.u' is missing but a required field"),
        ({"q": {}, "u": {}, "bogus": 1}, 40415,
         "BSON field 'update.updates.bogus' is an unknown field."),
        ({"q": {}, "u": 3}, 9, "Update argument must be either an object or an array"),
        ({"q": {}, "u": {}, "collation": "fr"}, 14,
         "BSON field 'update.updates.collation' is the wrong type 'string', expected type 'object'"),
        ({"q": {}, "u": {}, "arrayFilters": 1}, 14,
         "BSON field 'update.updates.arrayFilters' is the wrong type 'int', expected type 'array'"),
        ({"q": {}, "u": {}, "hint": 1}, 9, "Hint must be a string or an object"),
    ]
    for bad, code, errmsg in cases:
        # The bad statement second: the first, good one must not have run either, ordered or not.
        for ordered in (True, False):
            assert refused(db, "update", "updates", [good, bad], ordered=ordered) == (code, errmsg)
    assert list(db.c.find({}, {"_id": 1, "a": 1})) == [{"_id": 1}, {"_id": 2}]


def test_delete_statement_of_the_wrong_type_fails_the_command_before_any_write(db):
    db.c.insert_many([{"_id": 1}, {"_id": 2}])
    good = {"q": {"_id": 1}, "limit": 1}
    cases = [
        ({"q": 5, "limit": 0}, 14,
         "BSON field 'delete.deletes.q' is the wrong type 'int', expected type 'object'"),
        ({"limit": 0}, 40414, "BSON field 'delete.deletes.q' is missing but a required field"),
        ({"q": {}}, 40414, "BSON field 'delete.deletes.limit' is missing but a required field"),
        ({"q": {}, "limit": 0, "multi": True}, 40415,
         "BSON field 'delete.deletes.multi' is an unknown field."),
        ({"q": {}, "limit": 0.5}, 9, "The limit field in delete objects must be 0 or 1. Got 0.5"),
    ]
    for bad, code, errmsg in cases:
        assert refused(db, "delete", "deletes", [good, bad], ordered=False) == (code, errmsg)
    assert db.c.count_documents({}) == 2


def test_an_update_operators_error_stays_the_statements_write_error(db):
    db.c.insert_many([{"_id": 1}, {"_id": 2, "s": "x"}])
    reply = db.command("update", "c", ordered=False, updates=[
        {"q": {"_id": 1}, "u": {"$bogus": {"a": 1}}},
        {"q": {"_id": 2}, "u": {"$inc": {"s": 1}}},
        {"q": {"_id": 1}, "u": {"$set": {"a": 1}}},
    ])
    assert [(e["index"], e["code"]) for e in reply["writeErrors"]] == [(0, 9), (1, 14)]
    assert reply["nModified"] == 1
    assert db.c.find_one({"_id": 1}) == {"_id": 1, "a": 1}
