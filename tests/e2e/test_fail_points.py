"""Test commands: `serve --setParameter`, `getParameter`/`setParameter`, and the
`failCommand` fail point through `configureFailPoint`, driven with pymongo as drivers' spec
tests drive mongod."""

import subprocess
import time

import pytest
from pymongo.errors import AutoReconnect, OperationFailure

from conftest import Server, shale_binary


@pytest.fixture
def test_server(tmp_path):
    srv = Server(tmp_path / "data", args=["--setParameter", "enableTestCommands=1"])
    yield srv
    srv.stop()


def fail_command(client, mode, **data):
    return client.admin.command("configureFailPoint", "failCommand", mode=mode, data=data)


def test_an_unknown_set_parameter_stops_the_start(tmp_path):
    run = subprocess.run(
        [shale_binary(), "serve", "--dbpath", str(tmp_path / "d"), "--port", "0",
         "--setParameter", "foo=bar"],
        capture_output=True, text=True, timeout=30,
    )
    assert run.returncode != 0
    assert "Unknown --setParameter 'foo'" in run.stderr + run.stdout


def test_configure_fail_point_does_not_exist_without_test_commands(client):
    with pytest.raises(OperationFailure) as e:
        fail_command(client, "alwaysOn", failCommands=["ping"], errorCode=2)
    assert e.value.code == 59
    assert client.admin.command("getParameter", 1, enableTestCommands=1)["enableTestCommands"] is False


def test_parameters_through_the_flag_and_at_run_time(tmp_path):
    srv = Server(tmp_path / "data", args=[
        "--setParameter", "enableTestCommands=1",
        "--setParameter", "transactionLifetimeLimitSeconds=7",
        "--setParameter", "localLogicalSessionTimeoutMinutes=3",
    ])
    try:
        c = srv.client()
        got = c.admin.command("getParameter", "*")
        assert got["enableTestCommands"] is True
        assert got["transactionLifetimeLimitSeconds"] == 7
        assert got["localLogicalSessionTimeoutMinutes"] == 3
        assert c.admin.command("hello")["logicalSessionTimeoutMinutes"] == 3
        was = c.admin.command("setParameter", 1, transactionLifetimeLimitSeconds=9)
        assert was["was"] == 7
        assert c.admin.command("getParameter", 1, transactionLifetimeLimitSeconds=1)[
            "transactionLifetimeLimitSeconds"] == 9
        with pytest.raises(OperationFailure) as e:
            c.admin.command("setParameter", 1, enableTestCommands=0)
        assert e.value.code == 20
        with pytest.raises(OperationFailure) as e:
            c.admin.command("setParameter", 1, noSuchParameter=1)
        assert e.value.code == 72
        opts = c.admin.command("getCmdLineOpts")["parsed"]
        assert opts["setParameter"]["enableTestCommands"] == "1"
        c.close()
    finally:
        srv.stop()


def test_times_fails_exactly_n_commands_with_the_code_and_labels(test_server):
    c = test_server.client()
    assert fail_command(c, {"times": 2}, failCommands=["insert"], errorCode=8,
                        errorLabels=["Custom"])["count"] == 0
    for _ in range(2):
        with pytest.raises(OperationFailure) as e:
            c.app.things.insert_one({"x": 1})
        assert e.value.code == 8
        assert e.value.details["codeName"] == "UnknownError"
        assert e.value.details["errmsg"] == "Failing command via 'failCommand' failpoint"
        assert e.value.has_error_label("Custom")
    c.app.things.insert_one({"x": 1})
    assert c.app.things.count_documents({}) == 1
    assert fail_command(c, "off")["count"] == 2
    c.close()


def test_skip_and_always_on_and_off(test_server):
    c = test_server.client()
    fail_command(c, {"skip": 1}, failCommands=["find"], errorCode=2)
    c.app.things.find_one()
    for _ in range(2):
        with pytest.raises(OperationFailure):
            c.app.things.find_one()
    fail_command(c, "off")
    c.app.things.find_one()
    # configureFailPoint itself is never failed, even when named.
    fail_command(c, "alwaysOn", failCommands=["configureFailPoint"], errorCode=2)
    fail_command(c, "off")
    c.close()


def test_app_name_limits_the_fail_point_to_one_client(test_server):
    admin = test_server.client()
    app = test_server.client(appName="victim")
    fail_command(admin, "alwaysOn", failCommands=["find"], errorCode=2, appName="victim")
    admin.app.things.find_one()
    with pytest.raises(OperationFailure):
        app.app.things.find_one()
    fail_command(admin, "off")
    app.close()
    admin.close()


def test_close_connection_drops_the_connection_without_a_reply(test_server):
    c = test_server.client(retryReads=False)
    fail_command(c, {"times": 1}, failCommands=["find"], closeConnection=True)
    with pytest.raises(AutoReconnect):
        c.app.things.find_one()
    assert c.app.things.find_one() is None
    c.close()


def test_block_connection_delays_the_command(test_server):
    c = test_server.client()
    fail_command(c, {"times": 1}, failCommands=["ping"], blockConnection=True, blockTimeMS=300)
    t = time.monotonic()
    c.admin.command("ping")
    assert time.monotonic() - t >= 0.3
    c.close()


def test_write_concern_error_is_added_after_the_write(test_server):
    c = test_server.client()
    fail_command(c, {"times": 1}, failCommands=["insert"],
                 writeConcernError={"code": 100, "errmsg": "wc failed"})
    reply = c.app.command("insert", "things", documents=[{"_id": 1}])
    assert reply["writeConcernError"]["code"] == 100
    assert c.app.things.count_documents({}) == 1
    c.close()


def test_a_transaction_statement_gets_the_transient_label(test_server):
    c = test_server.client()
    c.app.things.insert_one({"_id": 0})
    fail_command(c, {"times": 1}, failCommands=["insert"], errorCode=112)
    with c.start_session() as s:
        s.start_transaction()
        with pytest.raises(OperationFailure) as e:
            c.app.things.insert_one({"_id": 1}, session=s)
        assert e.value.has_error_label("TransientTransactionError")
        s.abort_transaction()
    c.close()
