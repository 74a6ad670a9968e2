"""User-defined roles with pymongo against the real binary under `--auth`: the role
commands (`createRole`, `updateRole`, `dropRole`, `dropAllRolesFromDatabase`,
`grantPrivilegesToRole`, `revokePrivilegesFromRole`, `grantRolesToRole`,
`revokeRolesFromRole`, `rolesInfo`) with mongod's document shapes and error codes, roles
inheriting roles, and authorization honouring them on connections that are already open."""

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import Server

PASSWORD = "pw"


def as_user(server, user) -> MongoClient:
    uri = f"mongodb://{user}:{PASSWORD}@127.0.0.1:{server.port}/?directConnection=true&authSource=admin"
    return MongoClient(uri, serverSelectionTimeoutMS=5000)


def code_of(run) -> int | None:
    try:
        run()
    except OperationFailure as e:
        return e.code
    return None


@pytest.fixture
def secured(tmp_path):
    srv = Server(tmp_path / "data", args=["--auth"])
    with srv.client() as c:
        c.admin.command("createUser", "root", pwd=PASSWORD, roles=["root"])
    with as_user(srv, "root") as root:
        root.app.c.insert_many([{"x": i} for i in range(3)])
        root.app.d.insert_one({"y": 1})
        yield srv, root
    srv.stop()


def test_create_role_stores_mongods_shape_and_refuses_duplicates(secured):
    _, root = secured
    root.app.command(
        "createRole",
        "cReader",
        privileges=[
            {"resource": {"db": "app", "collection": "c"}, "actions": ["find", "listIndexes"]},
            {"resource": {"db": "app", "collection": "c"}, "actions": ["find"]},
        ],
        roles=[],
    )
    stored = root.admin["system.roles"].find_one({"_id": "app.cReader"})
    assert stored == {
        "_id": "app.cReader",
        "role": "cReader",
        "db": "app",
        "privileges": [{"resource": {"db": "app", "collection": "c"}, "actions": ["find", "listIndexes"]}],
        "roles": [],
    }
    with pytest.raises(OperationFailure) as e:
        root.app.command("createRole", "cReader", privileges=[], roles=[])
    assert e.value.code == 51002
    assert e.value.details["errmsg"] == 'Role "cReader@app" already exists'


def test_role_commands_refuse_what_mongod_refuses(secured):
    _, root = secured
    app = root.app
    assert code_of(lambda: app.command("createRole", "read", privileges=[], roles=[])) == 2
    assert code_of(lambda: app.command("createRole", "r", privileges=[], roles=["nope"])) == 31
    assert code_of(lambda: app.command("createRole", "r", roles=[])) == 40414
    bad_action = [{"resource": {"db": "app", "collection": ""}, "actions": ["fnd"]}]
    with pytest.raises(OperationFailure) as e:
        app.command("createRole", "r", privileges=bad_action, roles=[])
    assert (e.value.code, e.value.details["errmsg"]) == (2, "Unknown action type in privilege set: 'fnd'")
    other_db = [{"resource": {"db": "other", "collection": ""}, "actions": ["find"]}]
    assert code_of(lambda: app.command("createRole", "r", privileges=other_db, roles=[])) == 49
    cluster = [{"resource": {"cluster": True}, "actions": ["serverStatus"]}]
    assert code_of(lambda: app.command("createRole", "r", privileges=cluster, roles=[])) == 49
    root.admin.command("createRole", "clusterish", privileges=cluster, roles=[])
    assert code_of(lambda: app.command("dropRole", "missing")) == 31
    assert code_of(lambda: app.command("dropRole", "read")) == 2
    assert code_of(lambda: app.command("updateRole", "missing", roles=[])) == 31
    assert code_of(lambda: app.command("updateRole", "missing")) == 2
    assert code_of(lambda: app.command("grantRolesToRole", "missing", roles=["read"])) == 31
    assert code_of(lambda: root.local.command("createRole", "r", privileges=[], roles=[])) == 2


def test_cycles_and_self_grants_are_refused(secured):
    _, root = secured
    app = root.app
    app.command("createRole", "a", privileges=[], roles=[])
    app.command("createRole", "b", privileges=[], roles=["a"])
    with pytest.raises(OperationFailure) as e:
        app.command("grantRolesToRole", "a", roles=["b"])
    assert e.value.code == 49
    assert e.value.details["errmsg"] == "Granting roles to a@app would introduce a cycle in the role graph"
    with pytest.raises(OperationFailure) as e:
        app.command("grantRolesToRole", "a", roles=["a"])
    assert (e.value.code, e.value.details["errmsg"]) == (49, "Cannot grant role a@app to itself.")


def test_a_user_with_a_custom_role_gets_exactly_its_privileges(secured):
    srv, root = secured
    root.app.command(
        "createRole",
        "cReader",
        privileges=[{"resource": {"db": "app", "collection": "c"}, "actions": ["find"]}],
        roles=[],
    )
    root.admin.command("createUser", "ann", pwd=PASSWORD, roles=[{"role": "cReader", "db": "app"}])
    with as_user(srv, "ann") as ann:
        assert len(ann.app.command("find", "c")["cursor"]["firstBatch"]) == 3
        assert code_of(lambda: ann.app.command("find", "d")) == 13
        assert code_of(lambda: ann.app.command("insert", "c", documents=[{"x": 9}])) == 13
        # Granted while ann is connected: the next command sees it.
        root.app.command(
            "grantPrivilegesToRole",
            "cReader",
            privileges=[{"resource": {"db": "app", "collection": "c"}, "actions": ["insert"]}],
        )
        ann.app.command("insert", "c", documents=[{"x": 9}])
        root.app.command(
            "revokePrivilegesFromRole",
            "cReader",
            privileges=[{"resource": {"db": "app", "collection": "c"}, "actions": ["insert"]}],
        )
        assert code_of(lambda: ann.app.command("insert", "c", documents=[{"x": 10}])) == 13
        status = ann.admin.command("connectionStatus")["authInfo"]
        assert status["authenticatedUserRoles"] == [{"role": "cReader", "db": "app"}]
        # Dropped: the role leaves the user and grants nothing.
        root.app.command("dropRole", "cReader")
        assert code_of(lambda: ann.app.command("find", "c")) == 13
    user = root.admin.command("usersInfo", {"user": "ann", "db": "admin"})["users"][0]
    assert user["roles"] == []


def test_roles_inherit_roles_and_their_privileges(secured):
    srv, root = secured
    app = root.app
    app.command(
        "createRole",
        "dWriter",
        privileges=[{"resource": {"db": "app", "collection": "d"}, "actions": ["insert", "find"]}],
        roles=[],
    )
    app.command("createRole", "middle", privileges=[], roles=["dWriter"])
    app.command("createRole", "top", privileges=[], roles=["middle", "read"])
    root.admin.command("createUser", "bob", pwd=PASSWORD, roles=[{"role": "top", "db": "app"}])
    with as_user(srv, "bob") as bob:
        bob.app.command("insert", "d", documents=[{"y": 2}])
        bob.app.command("find", "c")  # through the built-in `read`
        assert code_of(lambda: bob.app.command("insert", "c", documents=[{}])) == 13
        roles = bob.admin.command("connectionStatus")["authInfo"]["authenticatedUserRoles"]
        assert {(r["role"], r["db"]) for r in roles} == {
            ("top", "app"), ("middle", "app"), ("read", "app"), ("dWriter", "app")
        }
        app.command("revokeRolesFromRole", "top", roles=["middle"])
        assert code_of(lambda: bob.app.command("insert", "d", documents=[{}])) == 13
        bob.app.command("find", "c")
        app.command("grantRolesToRole", "top", roles=["middle"])
        bob.app.command("insert", "d", documents=[{"y": 3}])
        # updateRole replaces what it is given.
        app.command("updateRole", "top", roles=[])
        assert code_of(lambda: bob.app.command("find", "c")) == 13


def test_roles_info_shows_roles_as_mongod(secured):
    _, root = secured
    app = root.app
    app.command(
        "createRole",
        "base",
        privileges=[{"resource": {"db": "app", "collection": "c"}, "actions": ["find"]}],
        roles=[],
    )
    app.command("createRole", "derived", privileges=[], roles=["base", "read"])
    [derived] = app.command("rolesInfo", "derived")["roles"]
    assert derived["_id"] == "app.derived" and derived["isBuiltin"] is False
    assert "privileges" not in derived
    assert {(r["role"], r["db"]) for r in derived["inheritedRoles"]} == {("base", "app"), ("read", "app")}
    [shown] = app.command("rolesInfo", {"role": "derived", "db": "app"}, showPrivileges=True)["roles"]
    assert shown["privileges"] == []
    resources = [p["resource"] for p in shown["inheritedPrivileges"]]
    assert {"db": "app", "collection": "c"} in resources and {"db": "app", "collection": ""} in resources
    everything = app.command("rolesInfo", 1)["roles"]
    assert [r["role"] for r in everything] == ["base", "derived"]
    with_builtin = app.command("rolesInfo", 1, showBuiltinRoles=True)["roles"]
    assert {"read", "readWrite", "dbOwner", "base", "derived"} <= {r["role"] for r in with_builtin}
    [read] = app.command("rolesInfo", "read", showPrivileges=True)["roles"]
    assert read["isBuiltin"] is True and read["privileges"]
    assert app.command("rolesInfo", "nothing")["roles"] == []
    fragment = app.command("rolesInfo", ["derived"], showPrivileges="asUserFragment")["userFragment"]
    assert fragment["roles"] == [{"role": "derived", "db": "app"}]
    assert code_of(lambda: app.command("rolesInfo", 1, showPrivileges="asUserFragment")) == 20


def test_drop_all_roles_from_database_pulls_them_from_users_and_roles(secured):
    _, root = secured
    root.app.command("createRole", "one", privileges=[], roles=[])
    root.app.command("createRole", "two", privileges=[], roles=["one"])
    root.admin.command(
        "createRole", "adminRole", privileges=[], roles=[{"role": "one", "db": "app"}]
    )
    root.admin.command(
        "createUser", "cat", pwd=PASSWORD, roles=[{"role": "two", "db": "app"}, {"role": "read", "db": "app"}]
    )
    assert root.app.command("dropAllRolesFromDatabase")["n"] == 2
    assert root.app.command("dropAllRolesFromDatabase")["n"] == 0
    [admin_role] = root.admin.command("rolesInfo", "adminRole")["roles"]
    assert admin_role["roles"] == []
    # As mongod, every role of the database is pulled, built-in ones included.
    [cat] = root.admin.command("usersInfo", "cat")["users"]
    assert cat["roles"] == []


def test_role_commands_need_their_actions(secured):
    srv, root = secured
    root.admin.command("createUser", "reader", pwd=PASSWORD, roles=[{"role": "read", "db": "app"}])
    root.admin.command("createUser", "uadmin", pwd=PASSWORD, roles=[{"role": "userAdmin", "db": "app"}])
    with as_user(srv, "reader") as reader:
        assert code_of(lambda: reader.app.command("createRole", "x", privileges=[], roles=[])) == 13
        assert code_of(lambda: reader.app.command("rolesInfo", 1)) == 13
        # Asking about a role one holds needs nothing.
        assert reader.app.command("rolesInfo", "read")["roles"][0]["role"] == "read"
    with as_user(srv, "uadmin") as uadmin:
        uadmin.app.command("createRole", "x", privileges=[], roles=[])
        assert uadmin.app.command("rolesInfo", 1)["roles"][0]["role"] == "x"
        uadmin.app.command("dropRole", "x")
        # A role reaching beyond its database needs grantRole there too.
        other = [{"resource": {"db": "other", "collection": ""}, "actions": ["find"]}]
        assert code_of(lambda: uadmin.admin.command("createRole", "y", privileges=other, roles=[])) == 13
