"""Authorization under `--auth` with pymongo against the real binary: for each of several
built-in roles a table of commands that must run or fail with `Unauthorized` (13) and
mongod's message; cursors that only the user who opened them may continue or kill;
`connectionStatus` and `usersInfo` with `showPrivileges`; `listDatabases` and
`listCollections` filtered to what a user may see."""

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import Server

PASSWORD = "pw"

# Each test user and its roles (users live in admin, as `authSource=admin`).
USERS = {
    "reader": [{"role": "read", "db": "app"}],
    "writer": [{"role": "readWrite", "db": "app"}],
    "dbadmin": [{"role": "dbAdmin", "db": "app"}],
    "useradmin": [{"role": "userAdmin", "db": "app"}],
    "monitor": [{"role": "clusterMonitor", "db": "admin"}],
    "root": [{"role": "root", "db": "admin"}],
    "anyreader": [{"role": "readAnyDatabase", "db": "admin"}],
}

# Command name → (what it runs, the users that may run it).
COMMANDS = {
    "find app": (lambda c: c.app.command("find", "c"), {"reader", "writer", "root", "anyreader"}),
    "find other": (lambda c: c.other.command("find", "c"), {"root", "anyreader"}),
    "count app": (lambda c: c.app.command("count", "c"), {"reader", "writer", "root", "anyreader"}),
    "insert app": (
        lambda c: c.app.command("insert", "c", documents=[{"x": 1}]),
        {"writer", "root"},
    ),
    "upsert app": (
        lambda c: c.app.command("update", "c", updates=[{"q": {"u": 1}, "u": {"$set": {"u": 1}}, "upsert": True}]),
        {"writer", "root"},
    ),
    "delete app": (
        lambda c: c.app.command("delete", "c", deletes=[{"q": {"none": 1}, "limit": 0}]),
        {"writer", "root"},
    ),
    "createIndexes app": (
        lambda c: c.app.command("createIndexes", "c", indexes=[{"key": {"x": 1}, "name": "x_1"}]),
        {"writer", "dbadmin", "root"},
    ),
    "dbStats app": (
        lambda c: c.app.command("dbStats"),
        {"reader", "writer", "dbadmin", "monitor", "root", "anyreader"},
    ),
    "listCollections app": (
        lambda c: c.app.command("listCollections"),
        {"reader", "writer", "dbadmin", "root", "anyreader"},
    ),
    "aggregate $out app": (
        lambda c: c.app.command("aggregate", "c", pipeline=[{"$out": "copy"}], cursor={}),
        {"writer", "root"},
    ),
    "aggregate $lookup other": (
        lambda c: c.app.command(
            "aggregate", "c", pipeline=[{"$lookup": {"from": {"db": "other", "coll": "c"}, "localField": "x", "foreignField": "x", "as": "o"}}], cursor={}
        ),
        {"root", "anyreader"},
    ),
    "createUser app": (
        lambda c: c.app.command("createUser", "made", pwd="x", roles=[]),
        {"useradmin", "root"},
    ),
    "usersInfo app": (lambda c: c.app.command("usersInfo", 1), {"useradmin", "root"}),
    "serverStatus": (lambda c: c.admin.command("serverStatus"), {"monitor", "root"}),
    "getParameter": (
        lambda c: c.admin.command("getParameter", 1, scramIterationCount=1),
        {"monitor", "root"},
    ),
    "setParameter": (
        lambda c: c.admin.command("setParameter", 1, scramIterationCount=10000),
        {"root"},
    ),
    "drop app.gone": (lambda c: c.app.command("drop", "gone"), {"writer", "dbadmin", "root"}),
    "ping": (lambda c: c.admin.command("ping"), set(USERS)),
    "currentOp": (lambda c: c.admin.command("currentOp"), {"monitor", "root"}),
    "currentOp $ownOps": (lambda c: c.admin.command({"currentOp": 1, "$ownOps": True}), set(USERS)),
    "$currentOp own": (lambda c: list(c.admin.aggregate([{"$currentOp": {}}])), set(USERS)),
    "$currentOp allUsers": (
        lambda c: list(c.admin.aggregate([{"$currentOp": {"allUsers": True}}])),
        {"monitor", "root"},
    ),
    "killOp": (lambda c: c.admin.command("killOp", op=2_000_000_000), {"root"}),
    "profile app": (lambda c: c.app.command("profile", -1), {"dbadmin", "root"}),
    "dataSize app": (
        lambda c: c.app.command("dataSize", "app.c"),
        {"reader", "writer", "root", "anyreader"},
    ),
    "compact app": (lambda c: c.app.command("compact", "c"), {"dbadmin", "root"}),
    "fsync": (lambda c: c.admin.command("fsync"), {"root"}),
}


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("authz") / "data", args=["--auth"])
    with srv.client() as c:
        c.admin.command("createUser", "root", pwd=PASSWORD, roles=["root"])
    with as_user(srv, "root") as c:
        for user, roles in USERS.items():
            if user != "root":
                c.admin.command("createUser", user, pwd=PASSWORD, roles=roles)
        c.app.c.insert_many([{"x": i} for i in range(5)])
        c.other.c.insert_one({"x": 1})
    yield srv
    srv.stop()


def as_user(server, user) -> MongoClient:
    uri = f"mongodb://{user}:{PASSWORD}@127.0.0.1:{server.port}/?directConnection=true&authSource=admin"
    return MongoClient(uri, serverSelectionTimeoutMS=5000)


def outcome(run, client) -> str:
    """"allowed" when the command ran or failed for another reason than authorization."""
    try:
        run(client)
    except OperationFailure as e:
        if e.code == 13:
            return "unauthorized"
    return "allowed"


@pytest.mark.parametrize("user", sorted(USERS))
def test_each_role_runs_exactly_its_commands(secured, user):
    with as_user(secured, user) as c:
        got = {name: outcome(run, c) for name, (run, _) in COMMANDS.items()}
    expected = {name: "allowed" if user in allowed else "unauthorized" for name, (_, allowed) in COMMANDS.items()}
    assert got == expected


def test_the_refusal_is_mongods_message(secured):
    with as_user(secured, "reader") as c:
        with pytest.raises(OperationFailure) as e:
            c.app.command("insert", "c", documents=[{"x": 1}])
    assert e.value.code == 13
    assert e.value.details["codeName"] == "Unauthorized"
    assert e.value.details["errmsg"].startswith('not authorized on app to execute command { insert: "c", ')


def test_a_cursor_belongs_to_the_user_that_opened_it(secured):
    with as_user(secured, "writer") as a, as_user(secured, "reader") as b:
        first = a.app.command("find", "c", batchSize=2)
        cursor_id = first["cursor"]["id"]
        assert cursor_id != 0
        with pytest.raises(OperationFailure) as e:
            b.app.command("getMore", cursor_id, collection="c")
        assert e.value.code == 13
        with pytest.raises(OperationFailure) as e:
            b.app.command("killCursors", "c", cursors=[cursor_id])
        assert e.value.code == 13
        more = a.app.command("getMore", cursor_id, collection="c", batchSize=1)
        assert len(more["cursor"]["nextBatch"]) == 1
        killed = a.app.command("killCursors", "c", cursors=[cursor_id])
        assert killed["cursorsKilled"] == [cursor_id]


def test_connection_status_and_users_info_show_privileges(secured):
    with as_user(secured, "reader") as c:
        info = c.admin.command("connectionStatus", showPrivileges=True)["authInfo"]
        by_resource = {str(p["resource"]): p["actions"] for p in info["authenticatedUserPrivileges"]}
        app_actions = by_resource[str({"db": "app", "collection": ""})]
        assert "find" in app_actions and "insert" not in app_actions
        # A user may always look at itself.
        me = c.admin.command("usersInfo", "reader", showPrivileges=True)["users"][0]
        assert me["inheritedRoles"] == [{"role": "read", "db": "app"}]
        assert any(p["resource"] == {"db": "app", "collection": ""} for p in me["inheritedPrivileges"])
        with pytest.raises(OperationFailure) as e:
            c.admin.command("usersInfo", "writer")
        assert e.value.code == 13


def test_listings_show_what_a_user_may_see(secured):
    with as_user(secured, "reader") as c:
        names = [d["name"] for d in c.admin.command("listDatabases", nameOnly=True)["databases"]]
        assert names == ["app"]
        with pytest.raises(OperationFailure) as e:
            c.admin.command("listDatabases", authorizedDatabases=False)
        assert e.value.code == 13
    with as_user(secured, "root") as c:
        names = {d["name"] for d in c.admin.command("listDatabases", nameOnly=True)["databases"]}
        assert {"app", "other", "admin"} <= names
        assert [d["name"] for d in c.admin.command("listDatabases", authorizedDatabases=True)["databases"]]
    with as_user(secured, "monitor") as c:
        with pytest.raises(OperationFailure) as e:
            c.app.command("listCollections")
        assert e.value.code == 13
        listed = c.app.command("listCollections", authorizedCollections=True, nameOnly=True)
        assert "c" in [d["name"] for d in listed["cursor"]["firstBatch"]]
