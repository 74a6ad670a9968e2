"""The commands the database tools send, replayed in their documented shapes (issue 26
item 2): mongorestore's `create` with the dumped `idIndex`, and the `serverStatus` sections
mongostat reads."""

import pytest
from pymongo.errors import OperationFailure


def test_mongorestore_create_with_id_index(db):
    # mongorestore: create with the dump's options and _id index spec, then insert.
    db.command(
        {
            "create": "restored",
            "idIndex": {"key": {"_id": 1}, "name": "_id_", "v": 2},
            "indexOptionDefaults": {"storageEngine": {}},
        }
    )
    db.restored.insert_many([{"_id": i} for i in range(3)])
    assert db.restored.count_documents({}) == 3
    # Older dumps name the namespace in the spec; mongod 7.0 accepts it.
    db.command({"create": "old", "idIndex": {"key": {"_id": 1}, "name": "_id_", "ns": "x.old", "v": 1}})
    db.command({"create": "flagged", "autoIndexId": True, "flags": 1})


def test_a_bad_id_index_is_refused(db):
    with pytest.raises(OperationFailure) as e:
        db.command({"create": "bad", "idIndex": {"key": {"a": 1}, "name": "_id_"}})
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        db.command({"create": "bad", "autoIndexId": False})
    assert e.value.code == 115
