"""Collection validators enforced (issue 27 item 6): query-operator validators refuse
inserts, updates, replacements and findAndModify that break them with
DocumentValidationFailure (121) and an errInfo naming the document; validationLevel
moderate lets already-invalid documents change, off and validationAction warn let every
write through; bypassDocumentValidation skips the check for one command; bad options and
validators that do not parse are refused at create."""

import pytest
from pymongo.errors import OperationFailure, WriteError

VALIDATOR = {"a": {"$type": "int"}}


def make(db, name, **options):
    db.create_collection(name, validator=VALIDATOR, **options)
    return db[name]


def test_writes_that_break_the_validator_fail_with_121(db):
    coll = make(db, "strict")
    coll.insert_one({"_id": 1, "a": 1})
    with pytest.raises(WriteError) as e:
        coll.insert_one({"_id": 2, "a": "x"})
    assert e.value.code == 121
    assert e.value.details["errInfo"]["failingDocumentId"] == 2
    assert isinstance(e.value.details["errInfo"]["details"], dict)
    with pytest.raises(WriteError) as e:
        coll.update_one({"_id": 1}, {"$set": {"a": "y"}})
    assert e.value.code == 121
    with pytest.raises(WriteError):
        coll.replace_one({"_id": 1}, {"a": 2.5})
    with pytest.raises(OperationFailure) as e:
        coll.find_one_and_update({"_id": 1}, {"$set": {"a": "z"}})
    assert e.value.code == 121
    assert e.value.details["errInfo"]["failingDocumentId"] == 1
    assert list(coll.find()) == [{"_id": 1, "a": 1}]


def test_bypass_document_validation_skips_the_check_for_one_command(db):
    coll = make(db, "bypass")
    coll.insert_one({"_id": 1, "a": "x"}, bypass_document_validation=True)
    coll.update_one({"_id": 1}, {"$set": {"b": 1}}, bypass_document_validation=True)
    with pytest.raises(WriteError):
        coll.insert_one({"_id": 2, "a": "x"})
    assert coll.count_documents({}) == 1


def test_moderate_off_and_warn(db):
    moderate = make(db, "moderate", validationLevel="moderate")
    moderate.insert_one({"_id": 1, "a": "old"}, bypass_document_validation=True)
    moderate.update_one({"_id": 1}, {"$set": {"a": "still invalid"}})
    moderate.insert_one({"_id": 2, "a": 2})
    with pytest.raises(WriteError):
        moderate.update_one({"_id": 2}, {"$set": {"a": "x"}})
    off = make(db, "off", validationLevel="off")
    off.insert_one({"_id": 1, "a": "x"})
    warn = make(db, "warn", validationAction="warn")
    warn.insert_one({"_id": 1, "a": "x"})
    assert warn.count_documents({}) == 1


@pytest.mark.parametrize(
    "options, code",
    [
        ({"validationLevel": "lax"}, 2),
        ({"validationAction": "shout"}, 2),
        ({"validator": {"a": {"$nope": 1}}}, None),
        ({"validator": {"$jsonSchema": {"required": ["a"]}}}, None),
    ],
)
def test_bad_options_are_refused_at_create(db, options, code):
    options = {"validator": VALIDATOR, **options}
    with pytest.raises(OperationFailure) as e:
        db.command("create", "bad", **options)
    if code is not None:
        assert e.value.code == code
    assert "bad" not in db.list_collection_names()


def test_coll_mod_sets_and_changes_validation(db):
    coll = db.modded
    coll.insert_one({"_id": 1, "a": "old"})
    db.command("collMod", "modded", validator=VALIDATOR)
    with pytest.raises(WriteError) as e:
        coll.insert_one({"_id": 2, "a": "x"})
    assert e.value.code == 121
    entry = next(db.list_collections(filter={"name": "modded"}))
    assert entry["options"]["validator"] == VALIDATOR
    db.command("collMod", "modded", validationAction="warn")
    coll.insert_one({"_id": 3, "a": "x"})
    db.command("collMod", "modded", validationAction="error", validationLevel="off")
    coll.insert_one({"_id": 4, "a": "x"})
    db.command("collMod", "modded", validationLevel="strict", validator={})
    coll.insert_one({"_id": 5, "a": "x"})
    assert coll.count_documents({}) == 4


@pytest.mark.parametrize(
    "args, code",
    [
        ({"index": {"name": "a_1", "hidden": True}}, 115),
        ({"nope": 1}, 40415),
        ({"validationLevel": "lax"}, 2),
    ],
)
def test_coll_mod_refusals(db, args, code):
    db.create_collection("target")
    with pytest.raises(OperationFailure) as e:
        db.command("collMod", "target", **args)
    assert e.value.code == code


def test_coll_mod_of_a_missing_collection(db):
    with pytest.raises(OperationFailure) as e:
        db.command("collMod", "missing", validator=VALIDATOR)
    assert e.value.code == 26
