"""Authentication with pymongo against the real binary: SCRAM-SHA-1 and SCRAM-SHA-256 (named
and negotiated), wrong passwords and unknown users failing alike, `--auth` refusing
unauthenticated commands, the localhost exception, user management commands, and a user
dropped while its connection is open."""

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import Server


@pytest.fixture
def auth_server(tmp_path):
    srv = Server(tmp_path / "secured", args=["--auth"])
    yield srv
    srv.stop()


def as_user(server, user, pwd, **kwargs) -> MongoClient:
    uri = f"mongodb://{user}:{pwd}@127.0.0.1:{server.port}/?directConnection=true"
    return MongoClient(uri, serverSelectionTimeoutMS=5000, **kwargs)


def first_user(server, user="root", pwd="secret", roles=("root",)):
    """Creates the first user over the localhost exception."""
    with server.client() as c:
        c.admin.command("createUser", user, pwd=pwd, roles=list(roles))


@pytest.mark.parametrize("mechanism", [None, "SCRAM-SHA-1", "SCRAM-SHA-256"])
def test_credentials_in_the_uri_log_in(auth_server, mechanism):
    first_user(auth_server)
    kwargs = {"authMechanism": mechanism} if mechanism else {}
    with as_user(auth_server, "root", "secret", **kwargs) as c:
        c.app.items.insert_one({"x": 1})
        assert c.app.items.count_documents({}) == 1
        status = c.admin.command("connectionStatus")["authInfo"]
        assert status["authenticatedUsers"] == [{"user": "root", "db": "admin"}]
        assert status["authenticatedUserRoles"] == [{"role": "root", "db": "admin"}]


def test_hello_names_the_mechanisms_of_a_user(auth_server):
    first_user(auth_server)
    with auth_server.client() as c:
        hello = c.admin.command("hello", saslSupportedMechs="admin.root")
        assert hello["saslSupportedMechs"] == ["SCRAM-SHA-1", "SCRAM-SHA-256"]
        assert "saslSupportedMechs" not in c.admin.command("hello", saslSupportedMechs="admin.nobody")


@pytest.mark.parametrize("user,pwd", [("root", "wrong"), ("nobody", "secret")])
def test_wrong_password_and_unknown_user_fail_alike(auth_server, user, pwd):
    first_user(auth_server)
    with as_user(auth_server, user, pwd) as c:
        with pytest.raises(OperationFailure) as e:
            c.app.items.find_one()
    assert e.value.code == 18
    assert e.value.details["errmsg"] == "Authentication failed."


def test_credentials_are_checked_without_auth_too(server):
    with server.client() as c:
        c.admin.command("createUser", "ann", pwd="pw", roles=[])
    with as_user(server, "ann", "not-pw") as c:
        with pytest.raises(OperationFailure) as e:
            c.admin.command("ping")
    assert e.value.code == 18
    with as_user(server, "ann", "pw") as c:
        c.admin.command("ping")


def test_auth_refuses_unauthenticated_commands(auth_server):
    with auth_server.client() as c:
        c.admin.command("ping")
        c.admin.command("buildInfo")
        with pytest.raises(OperationFailure) as e:
            c.app.items.find_one()
        assert e.value.code == 13
        assert e.value.details["errmsg"] == "Command find requires authentication"
        with pytest.raises(OperationFailure) as e:
            c.admin.command("listDatabases")
        assert e.value.code == 13


def test_the_localhost_exception_creates_the_first_user_then_closes(auth_server):
    with auth_server.client() as c:
        with pytest.raises(OperationFailure) as e:
            c.app.command("createUser", "app", pwd="pw", roles=[])
        assert e.value.code == 13, "only on admin"
        c.admin.command("createUser", "root", pwd="secret", roles=["root"])
        with pytest.raises(OperationFailure) as e:
            c.admin.command("createUser", "second", pwd="pw", roles=[])
        assert e.value.code == 13
        with pytest.raises(OperationFailure):
            c.admin.command("usersInfo", 1)


def test_drop_all_users_with_no_users(server, auth_server):
    with server.client() as c:
        assert c.app.command("dropAllUsersFromDatabase")["n"] == 0
    first_user(auth_server)
    with as_user(auth_server, "root", "secret") as c:
        assert c.app.command("dropAllUsersFromDatabase")["n"] == 0
        c.app.command("createUser", "a", pwd="pw", roles=["read"])
        c.app.command("createUser", "b", pwd="pw", roles=[])
        assert c.app.command("dropAllUsersFromDatabase")["n"] == 2


def test_users_info_hides_credentials_unless_asked(server):
    with server.client() as c:
        c.app.command("createUser", "ann", pwd="pw", roles=["readWrite"], customData={"team": 1})
        c.admin.command("createUser", "bob", pwd="pw", roles=[], mechanisms=["SCRAM-SHA-256"])
        [ann] = c.app.command("usersInfo", "ann")["users"]
        assert "credentials" not in ann
        assert ann["_id"] == "app.ann" and ann["user"] == "ann" and ann["db"] == "app"
        assert ann["roles"] == [{"role": "readWrite", "db": "app"}]
        assert ann["mechanisms"] == ["SCRAM-SHA-1", "SCRAM-SHA-256"]
        assert ann["customData"] == {"team": 1}
        every = c.app.command("usersInfo", {"forAllDBs": True})["users"]
        assert [u["_id"] for u in every] == ["admin.bob", "app.ann"]
        assert all("credentials" not in u for u in every)
        [shown] = c.app.command("usersInfo", {"user": "bob", "db": "admin"}, showCredentials=True)["users"]
        scram = shown["credentials"]["SCRAM-SHA-256"]
        assert set(scram) == {"iterationCount", "salt", "storedKey", "serverKey"}
        assert scram["iterationCount"] == 15000
        assert "SCRAM-SHA-1" not in shown["credentials"]
        stored = c.admin["system.users"].find_one({"_id": "app.ann"})
        assert "pwd" not in stored and "credentials" in stored


def test_user_commands_answer_like_mongod(server):
    with server.client() as c:
        c.app.command("createUser", "ann", pwd="pw", roles=[])
        with pytest.raises(OperationFailure) as e:
            c.app.command("createUser", "ann", pwd="pw", roles=[])
        assert e.value.code == 51003
        assert e.value.details["errmsg"] == 'User "ann@app" already exists'
        with pytest.raises(OperationFailure) as e:
            c.app.command("dropUser", "nobody")
        assert (e.value.code, e.value.details["errmsg"]) == (11, "User 'nobody@app' not found")
        with pytest.raises(OperationFailure) as e:
            c.app.command("createUser", "x", pwd="pw", roles=["noSuchRole"])
        assert e.value.code == 31
        c.app.command("grantRolesToUser", "ann", roles=["read", {"role": "readWrite", "db": "other"}])
        c.app.command("revokeRolesFromUser", "ann", roles=["read"])
        [ann] = c.app.command("usersInfo", "ann")["users"]
        assert ann["roles"] == [{"role": "readWrite", "db": "other"}]
        c.app.command("updateUser", "ann", pwd="new", mechanisms=["SCRAM-SHA-256"])
        [ann] = c.app.command("usersInfo", "ann")["users"]
        assert ann["mechanisms"] == ["SCRAM-SHA-256"]
        c.app.command("dropUser", "ann")
        assert c.app.command("usersInfo", 1)["users"] == []
    with as_user(server, "ann", "new", authSource="app") as c:
        with pytest.raises(OperationFailure) as e:
            c.app.command("ping")
        assert e.value.code == 18


def test_a_user_dropped_while_connected_loses_access(auth_server):
    first_user(auth_server)
    with as_user(auth_server, "root", "secret") as admin:
        # readWrite on app: a readWrite of admin may not write app since roles are enforced.
        admin.admin.command("createUser", "temp", pwd="pw", roles=[{"role": "readWrite", "db": "app"}])
        with as_user(auth_server, "temp", "pw") as temp:
            temp.app.items.insert_one({"x": 1})
            admin.admin.command("dropUser", "temp")
            with pytest.raises(OperationFailure) as e:
                temp.app.items.find_one()
            assert e.value.code == 13
            status = temp.admin.command("connectionStatus")["authInfo"]
            assert status["authenticatedUsers"] == []


def test_iteration_counts_are_server_parameters(tmp_path):
    srv = Server(tmp_path / "data", args=["--setParameter", "scramSHA256IterationCount=20000"])
    try:
        with srv.client() as c:
            assert c.admin.command("getParameter", 1, scramSHA256IterationCount=1)[
                "scramSHA256IterationCount"] == 20000
            c.admin.command("setParameter", 1, scramIterationCount=12000)
            c.admin.command("createUser", "ann", pwd="pw", roles=[])
            [ann] = c.admin.command("usersInfo", "ann", showCredentials=True)["users"]
            assert ann["credentials"]["SCRAM-SHA-1"]["iterationCount"] == 12000
            assert ann["credentials"]["SCRAM-SHA-256"]["iterationCount"] == 20000
        with as_user(srv, "ann", "pw") as c:
            c.admin.command("ping")
    finally:
        srv.stop()


def test_the_access_control_warning_is_gone_with_auth(auth_server):
    first_user(auth_server)
    with as_user(auth_server, "root", "secret") as c:
        log = c.admin.command("getLog", "startupWarnings")["log"]
    assert not any("Access control is not enabled" in line for line in log)


def test_hello_answers_speculative_authenticate(auth_server):
    first_user(auth_server)
    from bson.binary import Binary
    first = Binary(b"n,,n=root,r=abcdefghijklmnop")
    request = {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": first, "db": "admin",
               "options": {"skipEmptyExchange": True}}
    with auth_server.client() as c:
        reply = c.admin.command("hello", speculativeAuthenticate=request)
        spec = reply["speculativeAuthenticate"]
        assert spec["conversationId"] == 1 and spec["done"] is False
        assert bytes(spec["payload"]).startswith(b"r=abcdefghijklmnop")
        bad = dict(request, mechanism="PLAIN")
        assert "speculativeAuthenticate" not in c.admin.command("hello", speculativeAuthenticate=bad)


def test_security_authorization_in_the_config_file(tmp_path):
    conf = tmp_path / "mongod.conf"
    conf.write_text("security:\n  authorization: enabled\n")
    srv = Server(tmp_path / "data", args=["--config", str(conf)])
    try:
        with srv.client() as c:
            with pytest.raises(OperationFailure) as e:
                c.app.items.find_one()
            assert e.value.code == 13
            c.admin.command("createUser", "root", pwd="secret", roles=["root"])
        with as_user(srv, "root", "secret") as c:
            parsed = c.admin.command("getCmdLineOpts")["parsed"]
            assert parsed["security"] == {"authorization": "enabled"}
    finally:
        srv.stop()
