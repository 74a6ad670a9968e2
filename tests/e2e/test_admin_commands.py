"""Administrative and diagnostic commands (getParameter, getCmdLineOpts, hostInfo,
whatsmyuri, connectionStatus, listCommands, getLog, sessions, logout) against the real
binary, checked against mongod 7.0's reply shapes."""

import datetime
import json
import threading

import pytest
from bson.int64 import Int64
from pymongo.errors import OperationFailure

from wire_client import RawConnection


def test_get_parameter_star_lists_parameters_in_name_order(client):
    reply = client.admin.command("getParameter", "*")
    assert reply["ok"] == 1.0
    assert reply["enableTestCommands"] is False
    assert reply["featureCompatibilityVersion"] == {"version": "7.0"}
    assert reply["logLevel"] == 0
    assert reply["quiet"] is False
    assert reply["localLogicalSessionTimeoutMinutes"] == 30
    names = [k for k in reply if k != "ok"]
    assert names == sorted(names)


def test_get_parameter_by_name(client):
    reply = client.admin.command({"getParameter": 1, "logLevel": 1, "notAParameter": 1})
    assert reply == {"logLevel": 0, "ok": 1.0}


def test_get_parameter_show_details(client):
    reply = client.admin.command(
        {"getParameter": {"showDetails": True}, "featureCompatibilityVersion": 1}
    )
    assert reply["featureCompatibilityVersion"] == {
        "value": {"version": "7.0"},
        "settableAtRuntime": False,
        "settableAtStartup": False,
    }


def test_get_parameter_unknown_is_invalid_options(client):
    with pytest.raises(OperationFailure) as err:
        client.admin.command({"getParameter": 1, "noSuchParameter": 1})
    assert err.value.code == 72
    assert err.value.details["codeName"] == "InvalidOptions"
    assert err.value.details["errmsg"] == "no option found to get"


def test_admin_only_commands_refuse_other_databases(client):
    for command in ("getParameter", "getCmdLineOpts", "getLog"):
        with pytest.raises(OperationFailure) as err:
            client.test.command({command: "*"})
        assert err.value.code == 13, command
        assert "may only be run against the admin database" in str(err.value)


def test_get_cmd_line_opts_reports_the_real_command_line(server, client):
    reply = client.admin.command("getCmdLineOpts")
    argv = reply["argv"]
    assert argv[1:] == ["serve", "--dbpath", str(server.dbpath), "--port", str(server.port)]
    assert reply["parsed"] == {
        "storage": {"dbPath": str(server.dbpath)},
        "net": {"port": server.port},
    }


def test_host_info(client):
    reply = client.admin.command("hostInfo")
    system = reply["system"]
    assert system["numCores"] >= 1
    assert system["memSizeMB"] > 0
    assert 0 < system["memLimitMB"] <= system["memSizeMB"]
    assert system["cpuAddrSize"] == 64
    assert isinstance(system["hostname"], str) and system["hostname"]
    assert reply["os"]["type"] == "Linux"
    assert "kernelVersion" in reply["extra"]


def test_host_info_numbers_have_mongods_bson_types(client):
    # mongod 7.0's hostInfo: cpuAddrSize, numCores and extra.maxOpenFiles are int32,
    # memSizeMB and memLimitMB int64 (pymongo decodes int32 as int, int64 as Int64).
    reply = client.admin.command("hostInfo")
    system = reply["system"]
    for name in ("cpuAddrSize", "numCores"):
        assert type(system[name]) is int, name
    for name in ("memSizeMB", "memLimitMB"):
        assert type(system[name]) is Int64, name
    assert type(system["numaEnabled"]) is bool
    assert isinstance(system["currentTime"], datetime.datetime)
    assert type(reply["extra"]["maxOpenFiles"]) is int


def test_whatsmyuri_is_the_clients_address(server):
    with RawConnection(server.port) as conn:
        ip, port = conn.sock.getsockname()
        reply = conn.command({"whatsmyuri": 1}).doc
    assert reply == {"you": f"{ip}:{port}", "ok": 1.0}


def test_connection_status_has_no_users(client):
    reply = client.admin.command("connectionStatus")
    assert reply == {
        "authInfo": {"authenticatedUsers": [], "authenticatedUserRoles": []},
        "ok": 1.0,
    }
    detailed = client.admin.command("connectionStatus", showPrivileges=True)
    assert detailed["authInfo"]["authenticatedUserPrivileges"] == []


def test_list_commands_describes_every_command(client):
    commands = client.admin.command("listCommands")["commands"]
    for name in (
        "ping", "hello", "isMaster", "buildInfo", "serverStatus", "getParameter",
        "getCmdLineOpts", "hostInfo", "whatsmyuri", "connectionStatus", "listCommands",
        "getLog", "startSession", "endSessions", "refreshSessions", "killAllSessions",
        "logout",
    ):
        entry = commands[name]
        assert isinstance(entry["help"], str) and entry["help"], name
        assert set(entry) >= {"help", "requiresAuth", "secondaryOk", "adminOnly", "apiVersions"}
    assert commands["getParameter"]["adminOnly"] is True
    assert commands["ping"]["adminOnly"] is False
    assert commands["ping"]["apiVersions"] == ["1"]
    assert list(commands) == sorted(commands)


def test_get_log_names_and_rings(client):
    assert client.admin.command("getLog", "*")["names"] == ["global", "startupWarnings"]
    glob = client.admin.command("getLog", "global")
    assert glob["totalLinesWritten"] >= len(glob["log"]) > 0
    lines = [json.loads(line) for line in glob["log"]]
    ready = next(l for l in lines if l["msg"] == "waiting for connections")
    # mongod's logv2 shape, which tools such as mongosh parse.
    assert list(ready) == ["t", "s", "c", "id", "ctx", "msg", "attr"]
    assert ready["t"]["$date"].endswith("+00:00") and ready["s"] == "I"
    warnings = client.admin.command("getLog", "startupWarnings")
    entries = [json.loads(line) for line in warnings["log"]]
    assert any(e["msg"].startswith("Access control is not enabled") for e in entries)
    assert all(e["s"] == "W" and e["c"] == "CONTROL" for e in entries)


def test_get_log_unknown_name_fails_like_mongod(client):
    with pytest.raises(OperationFailure) as err:
        client.admin.command("getLog", "nope")
    assert err.value.details == {"ok": 0.0, "errmsg": "no RamLog named: nope"}
    with pytest.raises(OperationFailure) as err:
        client.admin.command("getLog", 1)
    assert err.value.code == 14


def test_start_session_returns_a_uuid(client):
    reply = client.admin.command("startSession")
    session_id = reply["id"]["id"]
    assert session_id.subtype == 4 and len(session_id) == 16
    assert reply["timeoutMinutes"] == 30
    assert client.admin.command("endSessions", [{"id": session_id}]) == {"ok": 1.0}
    assert client.admin.command("refreshSessions", [{"id": session_id}]) == {"ok": 1.0}
    assert client.admin.command("killSessions", [{"id": session_id}]) == {"ok": 1.0}
    assert client.admin.command("killAllSessions", []) == {"ok": 1.0}


def test_session_commands_check_their_arguments(client):
    with pytest.raises(OperationFailure) as err:
        client.admin.command("endSessions", 1)
    assert err.value.code == 14
    with pytest.raises(OperationFailure) as err:
        client.admin.command("refreshSessions", [{"id": "not-a-uuid"}])
    assert err.value.code == 14


def test_driver_sessions_work(client):
    with client.start_session() as s:
        assert client.admin.command("ping", session=s)["ok"] == 1.0


def test_logout(client):
    assert client.admin.command("logout") == {"ok": 1.0}


def test_many_connections_run_commands_concurrently(server):
    """Commands run on the blocking pool: many clients at once all get their replies."""
    errors = []

    def worker():
        try:
            c = server.client()
            for _ in range(20):
                assert c.admin.command("ping")["ok"] == 1.0
                assert "shale" in c.admin.command("serverStatus")
            c.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors[:3]
