"""`maxTimeMS` is enforced, not accepted and ignored: an operation whose scan runs past it
fails with MaxTimeMSExpired (50) at its next check (the one `killOp` uses, once per document
scanned), and bad values are refused with BadValue (2) as mongod refuses them."""

import pytest
from pymongo.errors import ExecutionTimeout, OperationFailure


@pytest.fixture
def big(client):
    coll = client.maxtime.big
    coll.drop()
    coll.insert_many([{"_id": i, "x": i % 7, "pad": "p" * 50} for i in range(20000)])
    yield coll
    coll.drop()


def test_a_scan_past_its_limit_fails_with_max_time_ms_expired(big):
    with pytest.raises(ExecutionTimeout) as e:
        list(big.find({"x": 99}).max_time_ms(1))
    assert e.value.code == 50
    with pytest.raises(OperationFailure) as e:
        list(big.aggregate([{"$match": {"x": 99}}], maxTimeMS=1))
    assert e.value.code == 50
    with pytest.raises(OperationFailure) as e:
        big.database.command("count", "big", query={"x": 99}, maxTimeMS=1)
    assert e.value.code == 50


def test_a_generous_limit_or_zero_changes_nothing(big):
    assert list(big.find({"x": 99}).max_time_ms(600000)) == []
    assert big.count_documents({"x": 3}, maxTimeMS=0) == len(
        [i for i in range(20000) if i % 7 == 3]
    )


@pytest.mark.parametrize("value", [-1, 1.5, "10", 2**31])
def test_bad_values_are_refused_with_bad_value(client, value):
    with pytest.raises(OperationFailure) as e:
        client.maxtime.command("find", "big", maxTimeMS=value)
    assert e.value.code == 2


def test_the_server_answers_after_an_expired_operation(big, client):
    with pytest.raises(ExecutionTimeout):
        list(big.find({"x": 99}).max_time_ms(1))
    assert client.admin.command("ping")["ok"] == 1
