"""Find options that change the result but are not built (min/max bounds, returnKey,
showRecordId) are refused with NotImplemented (238), never accepted and ignored; their
harmless forms (false, null) run the find as usual."""

import pytest
from pymongo.errors import OperationFailure


@pytest.mark.parametrize(
    "option",
    [{"min": {"a": 1}}, {"max": {"a": 5}}, {"returnKey": True}, {"showRecordId": True}],
)
def test_unbuilt_options_are_refused(coll, option):
    coll.insert_many([{"_id": i, "a": i} for i in range(3)])
    with pytest.raises(OperationFailure) as e:
        coll.database.command({"find": coll.name, "filter": {}, **option})
    assert e.value.code == 238, e.value.details
    assert next(iter(option)) in e.value.details["errmsg"]


def test_their_harmless_forms_run_the_find(coll):
    coll.insert_many([{"_id": i, "a": i} for i in range(3)])
    reply = coll.database.command(
        {"find": coll.name, "returnKey": False, "showRecordId": False, "min": None}
    )
    assert len(reply["cursor"]["firstBatch"]) == 3
