"""`authenticationRestrictions` with pymongo against the real binary (issue 25): a user's own
`clientSource`/`serverAddress` restrictions and those inherited from its roles are enforced at
login (a refusal is `AuthenticationFailed` exactly as a wrong password, the reason only in the
server log); a restriction set on a logged-in user takes its privileges away; malformed
restrictions are refused with mongod's codes; `usersInfo`/`rolesInfo` show them.

The server listens on every address. Connecting to 127.0.0.2 gives a connection whose client
end is 127.0.0.1 and whose server end is 127.0.0.2, so `serverAddress` is told apart from
`clientSource` on loopback alone; a test that needs a client address outside loopback uses the
machine's own non-loopback address and is skipped where there is none."""

import socket

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import Server


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    server = Server(tmp_path_factory.mktemp("restrictions") / "data", args=["--auth", "--bind_ip_all"])
    with server.client() as c:
        c.admin.command("createUser", "root", pwd="pw", roles=["root"])
    yield server
    server.stop()


@pytest.fixture
def root(srv):
    with login(srv, "root", "pw") as c:
        yield c
        for user in c.admin.command("usersInfo", 1)["users"]:
            if user["user"] != "root":
                c.admin.command("dropUser", user["user"])
        for role in c.admin.command("rolesInfo", 1)["roles"]:
            c.admin.command("dropRole", role["role"])


def login(server, user, pwd, host="127.0.0.1", **kwargs) -> MongoClient:
    uri = f"mongodb://{user}:{pwd}@{host}:{server.port}/?directConnection=true&authSource=admin"
    return MongoClient(uri, serverSelectionTimeoutMS=5000, **kwargs)


def can_log_in(server, user, host="127.0.0.1") -> bool:
    with login(server, user, "pw", host=host) as c:
        try:
            c.admin.command("ping")
            return True
        except OperationFailure as e:
            assert e.code == 18, e.details
            assert e.details["errmsg"] == "Authentication failed."
            return False


def own_address() -> str | None:
    """The machine's address on its default route, if it has one outside loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
            addr = s.getsockname()[0]
        except OSError:
            return None
    return None if addr.startswith("127.") or addr == "0.0.0.0" else addr


def test_a_client_source_restriction_admits_only_its_ranges(srv, root):
    root.admin.command("createUser", "near", pwd="pw", roles=[],
                       authenticationRestrictions=[{"clientSource": ["127.0.0.1"]}])
    root.admin.command("createUser", "far", pwd="pw", roles=[],
                       authenticationRestrictions=[{"clientSource": ["10.0.0.0/8", "fd00::/8"]}])
    assert can_log_in(srv, "near")
    assert not can_log_in(srv, "far")
    log = srv.read_log()
    assert "Failed to acquire user because of unmet authentication restrictions" in log
    assert "Client source 127.0.0.1 does not fall within" in log


def test_a_server_address_restriction_checks_the_address_connected_to(srv, root):
    root.admin.command("createUser", "via2", pwd="pw", roles=[],
                       authenticationRestrictions=[{"serverAddress": ["127.0.0.2"]}])
    assert not can_log_in(srv, "via2", host="127.0.0.1")
    assert can_log_in(srv, "via2", host="127.0.0.2")
    # One document needs both of its lists; any one document of the array will do.
    root.admin.command("createUser", "both", pwd="pw", roles=[], authenticationRestrictions=[
        {"clientSource": ["127.0.0.1"], "serverAddress": ["127.0.0.2"]}])
    root.admin.command("createUser", "either", pwd="pw", roles=[], authenticationRestrictions=[
        {"clientSource": ["10.0.0.0/8"]}, {"serverAddress": ["127.0.0.2"]}])
    for user in ["both", "either"]:
        assert not can_log_in(srv, user, host="127.0.0.1")
        assert can_log_in(srv, user, host="127.0.0.2")


def test_a_client_outside_loopback_is_refused_a_loopback_user(srv, root):
    addr = own_address()
    if addr is None:
        pytest.skip("no non-loopback address on this machine")
    root.admin.command("createUser", "local", pwd="pw", roles=[],
                       authenticationRestrictions=[{"clientSource": ["127.0.0.1"]}])
    root.admin.command("createUser", "lan", pwd="pw", roles=[],
                       authenticationRestrictions=[{"clientSource": [f"{addr}/32"]}])
    assert can_log_in(srv, "local", host="127.0.0.1")
    assert not can_log_in(srv, "local", host=addr)
    assert can_log_in(srv, "lan", host=addr)
    assert not can_log_in(srv, "lan", host="127.0.0.1")


def test_restrictions_are_inherited_from_roles_direct_and_indirect(srv, root):
    root.admin.command("createRole", "farRole", privileges=[], roles=[],
                       authenticationRestrictions=[{"clientSource": ["10.0.0.0/8"]}])
    root.admin.command("createRole", "middle", privileges=[], roles=["farRole"])
    root.admin.command("createUser", "direct", pwd="pw", roles=["farRole"])
    root.admin.command("createUser", "indirect", pwd="pw", roles=["middle", {"role": "read", "db": "app"}])
    assert not can_log_in(srv, "direct")
    assert not can_log_in(srv, "indirect")
    root.admin.command("updateRole", "farRole", authenticationRestrictions=[])
    assert can_log_in(srv, "direct")
    assert can_log_in(srv, "indirect")
    # The user's own restrictions and each role's must all be met.
    root.admin.command("updateRole", "middle", authenticationRestrictions=[{"clientSource": ["127.0.0.0/8"]}])
    root.admin.command("updateUser", "indirect", authenticationRestrictions=[{"serverAddress": ["127.0.0.2"]}])
    assert not can_log_in(srv, "indirect", host="127.0.0.1")
    assert can_log_in(srv, "indirect", host="127.0.0.2")


def test_restrictions_set_on_a_logged_in_user_take_its_privileges_away(srv, root):
    root.admin.command("createRole", "reader", privileges=[], roles=[{"role": "read", "db": "app"}])
    root.admin.command("createUser", "live", pwd="pw", roles=["reader"])
    with login(srv, "live", "pw") as c:
        c.app.items.find_one()
        root.admin.command("updateRole", "reader", authenticationRestrictions=[{"clientSource": ["192.0.2.99"]}])
        with pytest.raises(OperationFailure) as e:
            c.app.items.find_one()
        assert e.value.code == 13
    assert "authentication restrictions are no longer met" in srv.read_log()


@pytest.mark.parametrize("restrictions,code,message", [
    ("127.0.0.1", 14, "BSON field 'createUser.authenticationRestrictions' is the wrong type 'string', expected type 'array'"),
    (None, 14, "BSON field 'createUser.authenticationRestrictions' is the wrong type 'null', expected type 'array'"),
    (["127.0.0.1"], 12, "'authenticationRestrictions' array sub-documents must be address restriction objects"),
    ([{"invalidRestriction": ["127.0.0.1"]}], 2, "BSON field 'address restriction.invalidRestriction' is an unknown field."),
    ([{"clientSource": ["10.0.0.1", "NOT_AN_IP_OR_CIDR"]}], 2, "Invalid IP address in CIDR string"),
    ([{"serverAddress": ["10.0.0.0/33"]}], 2, "Invalid length in CIDR string"),
    ([{"clientSource": ["10.0.0.0/x"]}], 2, "Non-numeric length in CIDR string"),
    ([{}], 162, "At least one of 'clientSource' and/or 'serverAddress' must be set"),
])
def test_malformed_restrictions_are_refused_with_mongods_codes(root, restrictions, code, message):
    with pytest.raises(OperationFailure) as e:
        root.admin.command("createUser", "bad", pwd="pw", roles=[], authenticationRestrictions=restrictions)
    assert (e.value.code, e.value.details["errmsg"]) == (code, message)
    assert root.admin.command("usersInfo", "bad")["users"] == []


def test_a_refused_update_changes_nothing(root):
    root.admin.command("createUser", "kept", pwd="pw", roles=[])
    root.admin.command("createRole", "keptRole", privileges=[], roles=[])
    bad = [{"clientSource": ["NOT_AN_IP_OR_CIDR"]}]
    for command, name in [("updateUser", "kept"), ("updateRole", "keptRole"), ("createRole", "newRole")]:
        extra = {"privileges": [], "roles": []} if command == "createRole" else {}
        with pytest.raises(OperationFailure) as e:
            root.admin.command(command, name, authenticationRestrictions=bad, **extra)
        assert e.value.code == 2
    assert "authenticationRestrictions" not in root.admin.system.users.find_one({"user": "kept"})
    assert "authenticationRestrictions" not in root.admin.system.roles.find_one({"role": "keptRole"})


def test_empty_restrictions_store_nothing_and_remove_them(root):
    root.admin.command("createUser", "plain", pwd="pw", roles=[], authenticationRestrictions=[])
    assert "authenticationRestrictions" not in root.admin.system.users.find_one({"user": "plain"})
    root.admin.command("updateUser", "plain", authenticationRestrictions=[{"clientSource": ["127.0.0.1"]}])
    assert "authenticationRestrictions" in root.admin.system.users.find_one({"user": "plain"})
    root.admin.command("updateUser", "plain", authenticationRestrictions=[])
    assert "authenticationRestrictions" not in root.admin.system.users.find_one({"user": "plain"})


def test_users_info_and_roles_info_show_own_and_inherited_restrictions(root):
    lo = [{"clientSource": ["127.0.0.1"]}]
    two = [{"clientSource": ["127.0.0.2"]}]
    three = [{"clientSource": ["127.0.0.3"]}]
    root.admin.command("createRole", "restrictedRole", privileges=[], roles=[], authenticationRestrictions=two)
    root.admin.command("createRole", "outer", privileges=[], roles=["restrictedRole"], authenticationRestrictions=three)
    root.admin.command("createUser", "plainUser", pwd="pw", roles=[])
    root.admin.command("createUser", "both", pwd="pw", roles=["outer"], authenticationRestrictions=lo)

    [plain] = root.admin.command("usersInfo", "plainUser", showAuthenticationRestrictions=True)["users"]
    assert plain["authenticationRestrictions"] == []
    assert plain["inheritedAuthenticationRestrictions"] == []
    [both] = root.admin.command("usersInfo", "both", showAuthenticationRestrictions=True)["users"]
    assert both["authenticationRestrictions"] == lo
    assert both["inheritedAuthenticationRestrictions"] == [three, two]
    for shown in [root.admin.command("usersInfo", "both")["users"][0],
                  root.admin.command("usersInfo", "both", showPrivileges=True)["users"][0]]:
        assert "authenticationRestrictions" not in shown
        assert "inheritedAuthenticationRestrictions" not in shown
    for whole in [1, {"forAllDBs": True}]:
        with pytest.raises(OperationFailure) as e:
            root.admin.command("usersInfo", whole, showAuthenticationRestrictions=True)
        assert e.value.code == 20
        assert all("authenticationRestrictions" not in u for u in root.admin.command("usersInfo", whole)["users"])

    [outer] = root.admin.command("rolesInfo", "outer", showAuthenticationRestrictions=True)["roles"]
    assert outer["authenticationRestrictions"] == three
    assert outer["inheritedAuthenticationRestrictions"] == [three, two]
    [bare] = root.admin.command("rolesInfo", "outer")["roles"]
    assert "authenticationRestrictions" not in bare
    fragment = root.admin.command("rolesInfo", ["outer"], showPrivileges="asUserFragment")["userFragment"]
    assert fragment["inheritedAuthenticationRestrictions"] == [three, two]
