"""`shale serve --config FILE` with mongod's YAML keys, flags overriding the file, and the
structured logs (`--logFormat json` in mongod's logv2 shape, `systemLog.path`, verbosity,
`--quiet`)."""

import json

import pytest

from conftest import Server, free_port


def write_config(tmp_path, text: str):
    path = tmp_path / "shale.conf"
    path.write_text(text)
    return path


def test_config_file_sets_port_dbpath_bind_and_cache(tmp_path):
    port = free_port()
    dbpath = tmp_path / "data"
    conf = write_config(
        tmp_path,
        f"""
storage:
  dbPath: {dbpath}
  wiredTiger:
    engineConfig:
      cacheSizeGB: 0.25
net:
  port: {port}
  bindIp: 127.0.0.1,localhost
systemLog:
  verbosity: 1
""",
    )
    srv = Server(dbpath, port=port, args=["--config", str(conf)], defaults=False)
    try:
        c = srv.client()
        status = c.admin.command("serverStatus")
        assert status["shale"]["engine"]["cache"]["budgetBytes"] == 256 * 1024 * 1024
        opts = c.admin.command("getCmdLineOpts")
        assert opts["argv"][1:] == ["serve", "--config", str(conf)]
        assert opts["parsed"] == {
            "config": str(conf),
            "storage": {"dbPath": str(dbpath), "wiredTiger": {"engineConfig": {"cacheSizeGB": 0.25}}},
            "net": {"port": port, "bindIp": "127.0.0.1,localhost"},
            "systemLog": {"verbosity": 1},
        }
        assert c.admin.command("getParameter", 1, logLevel=1)["logLevel"] == 1
        assert dbpath.is_dir()
        c.close()
    finally:
        assert srv.stop() == 0


def test_flags_override_the_file(tmp_path):
    file_port, flag_port = free_port(), free_port()
    dbpath = tmp_path / "data"
    conf = write_config(
        tmp_path,
        f"storage:\n  dbPath: {tmp_path / 'unused'}\n  shale:\n    cacheSizeGB: 0.5\n"
        f"net:\n  port: {file_port}\n",
    )
    srv = Server(dbpath, port=flag_port, args=["--config", str(conf)])
    try:
        c = srv.client()
        parsed = c.admin.command("getCmdLineOpts")["parsed"]
        assert parsed["net"]["port"] == flag_port
        assert parsed["storage"]["dbPath"] == str(dbpath)
        assert parsed["storage"]["shale"] == {"cacheSizeGB": 0.5}
        budget = c.admin.command("serverStatus")["shale"]["engine"]["cache"]["budgetBytes"]
        assert budget == 512 * 1024 * 1024
        c.close()
        assert dbpath.is_dir() and not (tmp_path / "unused").exists()
    finally:
        srv.stop()


@pytest.mark.parametrize(
    "text, message",
    [
        ("net:\n  port: not-a-port\n", "net.port must be an integer"),
        ("net: [1, 2\n", "not valid YAML"),
        ("systemLog:\n  destination: syslog\n", "only \"file\" is supported"),
        ("storage:\n  shale:\n    cacheSizeGB: 0\n", "cacheSizeGB must be a positive"),
    ],
)
def test_bad_config_files_stop_the_server_with_a_reason(tmp_path, text, message):
    conf = write_config(tmp_path, text)
    with pytest.raises(RuntimeError, match="exited with 1") as err:
        Server(tmp_path / "data", args=["--config", str(conf)])
    assert message in str(err.value)


def test_unknown_keys_are_warned_about_and_ignored(tmp_path):
    conf = write_config(tmp_path, "processManagement:\n  fork: false\n")
    srv = Server(tmp_path / "data", args=["--config", str(conf)])
    try:
        assert "processManagement.fork" in srv.read_log()
    finally:
        srv.stop()


def test_json_logs_have_fields_from_start_to_shutdown(tmp_path):
    srv = Server(tmp_path / "data", args=["--logFormat", "json"])
    c = srv.client()
    c.admin.command("ping")
    c.close()
    assert srv.stop() == 0
    lines = [json.loads(l) for l in srv.read_log().splitlines() if l.strip()]
    messages = [l["msg"] for l in lines]
    for expected in ("ShaleDB starting", "waiting for connections", "shutting down",
                     "shutdown complete"):
        assert expected in messages, messages
    ready = next(l for l in lines if l["msg"] == "waiting for connections")
    assert ready["attr"]["port"] == srv.port
    assert ready["attr"]["dbpath"] == str(tmp_path / "data")
    assert (ready["s"], ready["c"]) == ("I", "CONTROL")
    accepted = next(l for l in lines if l["msg"] == "connection accepted")
    assert accepted["ctx"].startswith("conn") and accepted["c"] == "NETWORK"
    signal = next(l for l in lines if l["msg"] == "signal received")
    assert signal["attr"]["signal"] == "SIGTERM"


def test_log_path_writes_the_log_to_a_file(tmp_path):
    log_file = tmp_path / "shale.log"
    srv = Server(tmp_path / "data", args=["--logpath", str(log_file)])
    assert srv.stop() == 0
    text = log_file.read_text()
    assert "waiting for connections" in text and "shutdown complete" in text
    assert "waiting for connections" not in srv.read_log()


def test_quiet_drops_connection_lines(tmp_path):
    srv = Server(tmp_path / "data", args=["--quiet"])
    c = srv.client()
    c.admin.command("ping")
    assert c.admin.command("getParameter", 1, quiet=1)["quiet"] is True
    c.close()
    srv.stop()
    log = srv.read_log()
    assert "waiting for connections" in log
    assert "connection accepted" not in log


def test_bind_ip_list_listens_on_each_address(tmp_path):
    srv = Server(tmp_path / "data", args=["--bind_ip", "127.0.0.1,127.0.0.2"])
    try:
        from pymongo import MongoClient

        for host in ("127.0.0.1", "127.0.0.2"):
            c = MongoClient(f"mongodb://{host}:{srv.port}/?directConnection=true",
                            serverSelectionTimeoutMS=5000)
            assert c.admin.command("ping")["ok"] == 1.0
            c.close()
    finally:
        srv.stop()
