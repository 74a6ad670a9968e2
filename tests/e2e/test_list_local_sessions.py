"""`$listLocalSessions` (issue 24 item 2): every session the server has seen, as mongod's
logical session cache lists it — `{_id: {id, uid}, lastUse}` with the empty user's uid —
filtered by user; `refreshSessions` moves `lastUse` on; the kill commands end sessions by
id, user or pattern; the stage is refused where mongod refuses it."""

import hashlib
import time
import uuid

from bson import Binary

from wire_client import RawConnection

NO_AUTH_UID = hashlib.sha256(b"").digest()


def lsid() -> dict:
    return {"id": Binary.from_uuid(uuid.uuid4())}


def listed(conn: RawConnection, spec: dict | None = None) -> dict:
    r = conn.command({"aggregate": 1, "pipeline": [{"$listLocalSessions": spec or {}}],
                      "cursor": {}, "$db": "admin"})
    assert r.doc["ok"] == 1.0, r.doc
    assert r.doc["cursor"]["ns"] == "admin.$cmd.aggregate"
    return {d["_id"]["id"]: d for d in r.doc["cursor"]["firstBatch"]}


def test_sessions_are_listed_refreshed_and_killed(server):
    a, b = lsid(), lsid()
    with RawConnection(server.port) as conn:
        assert conn.command({"ping": 1, "lsid": a, "$db": "admin"}).doc["ok"] == 1.0
        assert conn.command({"find": "c", "lsid": b, "$db": "app"}).doc["ok"] == 1.0
        sessions = listed(conn)
        assert a["id"] in sessions and b["id"] in sessions
        doc = sessions[a["id"]]
        assert doc["_id"]["uid"] == NO_AUTH_UID
        assert set(doc) == {"_id", "lastUse"}
        assert listed(conn, {"allUsers": True}).keys() == sessions.keys()
        assert listed(conn, {"users": [{"user": "u", "db": "admin"}]}) == {}

        before = sessions[a["id"]]["lastUse"]
        time.sleep(0.02)
        assert conn.command({"refreshSessions": [a], "$db": "admin"}).doc["ok"] == 1.0
        assert listed(conn)[a["id"]]["lastUse"] > before

        # The rest of the pipeline runs over the listed sessions.
        r = conn.command({"aggregate": 1, "cursor": {}, "$db": "admin", "pipeline": [
            {"$listLocalSessions": {}}, {"$limit": 1}, {"$project": {"_id": 0, "x": {"$literal": 1}}}]})
        assert r.doc["cursor"]["firstBatch"] == [{"x": 1}]

        # A named user's sessions: none here. A pattern by lsid: that one.
        assert conn.command({"killAllSessions": [{"user": "u", "db": "admin"}], "$db": "admin"}).doc["ok"] == 1.0
        assert b["id"] in listed(conn)
        r = conn.command({"killAllSessionsByPattern": [{"lsid": b}], "$db": "admin"})
        assert r.doc["ok"] == 1.0, r.doc
        assert b["id"] not in listed(conn)
        assert conn.command({"killAllSessions": [], "$db": "admin"}).doc["ok"] == 1.0
        # The listing command's own session is not recorded (it carried no lsid).
        assert listed(conn) == {}


def test_the_stage_is_refused_where_mongod_refuses_it(server):
    with RawConnection(server.port) as conn:
        r = conn.command({"aggregate": "c", "pipeline": [{"$listLocalSessions": {}}], "cursor": {}, "$db": "admin"})
        assert r.doc["code"] == 73, r.doc
        r = conn.command({"aggregate": 1, "pipeline": [{"$limit": 1}, {"$listLocalSessions": {}}],
                          "cursor": {}, "$db": "admin"})
        assert r.doc["code"] == 40602, r.doc
        r = conn.command({"aggregate": 1, "pipeline": [{"$listLocalSessions": {"allUsers": True, "users": [
            {"user": "u", "db": "admin"}]}}], "cursor": {}, "$db": "admin"})
        assert r.doc["code"] == 12, r.doc
        # Another server stage that is not built is still refused loudly.
        r = conn.command({"aggregate": 1, "pipeline": [{"$indexStats": {}}], "cursor": {}, "$db": "admin"})
        assert r.doc["code"] == 238, r.doc


def test_the_session_timeout_is_a_serve_flag(tmp_path):
    from conftest import Server

    srv = Server(tmp_path / "data", args=["--localLogicalSessionTimeoutMinutes", "7"])
    try:
        client = srv.client()
        r = client.admin.command({"getParameter": 1, "localLogicalSessionTimeoutMinutes": 1})
        assert r["localLogicalSessionTimeoutMinutes"] == 7
        assert client.admin.command("hello")["logicalSessionTimeoutMinutes"] == 7
        assert client.admin.command("startSession")["timeoutMinutes"] == 7
        client.close()
    finally:
        srv.stop()
