"""Sessions belong to users (issue 24 items 2 and 5): mongod keys a logical session by its
`lsid.id` and the SHA-256 digest of the logged-in user's `user@db` (`uid`), so one id sent by
two users is two sessions; `$listLocalSessions` lists the caller's own by default, and
`killAllSessions` by user ends only that user's; the oplog's `lsid` carries the `uid`; and
at most `maxSessions` sessions are held, a new one past it refused with
TooManyLogicalSessions (261)."""

import hashlib
import uuid

import pytest
from bson import Binary
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import REPL_SET, Server
from wire_client import RawConnection

NO_AUTH_UID = hashlib.sha256(b"").digest()


def uid(user: str, db: str = "admin") -> bytes:
    return hashlib.sha256(f"{user}@{db}".encode()).digest()


def as_user(server, user, pwd, **kwargs) -> MongoClient:
    uri = f"mongodb://{user}:{pwd}@127.0.0.1:{server.port}/?directConnection=true"
    return MongoClient(uri, serverSelectionTimeoutMS=5000, **kwargs)


def session_with_id(client, sid):
    """A pymongo session of `client` that sends `lsid: {id: sid}` (pymongo puts its own
    session's lsid on every command, so two users can share an id only this way)."""
    s = client.start_session()
    s.session_id  # materializes pymongo's lazily made server session
    s._server_session.session_id = {"id": sid}
    return s


def listed(client, spec=None) -> list:
    return list(client.admin.aggregate([{"$listLocalSessions": spec or {}}]))


@pytest.fixture
def auth_server(tmp_path):
    srv = Server(tmp_path / "secured", args=["--auth"])
    with srv.client() as c:
        c.admin.command("createUser", "root", pwd="secret", roles=["root"])
    with as_user(srv, "root", "secret") as c:
        c.admin.command("createUser", "ann", pwd="pw", roles=["root"])
    yield srv
    srv.stop()


def test_one_id_sent_by_two_users_is_two_sessions(auth_server):
    sid = Binary.from_uuid(uuid.uuid4())
    with as_user(auth_server, "root", "secret") as root, as_user(auth_server, "ann", "pw") as ann:
        for c in (root, ann):
            c.admin.command("ping", session=session_with_id(c, sid))
        mine = [d["_id"] for d in listed(root) if d["_id"]["id"] == sid]
        assert [d["uid"] for d in mine] == [uid("root")], "by default: the caller's own"
        both = sorted(d["_id"]["uid"] for d in listed(root, {"allUsers": True}) if d["_id"]["id"] == sid)
        assert both == sorted([uid("root"), uid("ann")])
        only_ann = listed(root, {"users": [{"user": "ann", "db": "admin"}]})
        assert [d["_id"]["uid"] for d in only_ann if d["_id"]["id"] == sid] == [uid("ann")]

        # Ending the id as root leaves ann's session; killing ann's by user ends it.
        root.admin.command({"endSessions": [{"id": sid}]})
        left = [d["_id"]["uid"] for d in listed(root, {"allUsers": True}) if d["_id"]["id"] == sid]
        assert left == [uid("ann")]
        root.admin.command({"killAllSessions": [{"user": "ann", "db": "admin"}]})
        assert not [d for d in listed(root, {"allUsers": True}) if d["_id"]["id"] == sid]


def test_a_transaction_of_one_user_is_not_reachable_by_another(auth_server):
    with as_user(auth_server, "root", "secret") as root, as_user(auth_server, "ann", "pw") as ann:
        root.app.t.insert_one({"_id": 0})
        s = root.start_session()
        s.start_transaction()
        root.app.t.insert_one({"_id": 1}, session=s)
        # The same id as ann: her session has no transaction 1 to commit.
        theirs = session_with_id(ann, s.session_id["id"])
        with pytest.raises(OperationFailure) as e:
            ann.admin.command({"commitTransaction": 1, "txnNumber": 1, "autocommit": False},
                              session=theirs)
        assert e.value.code == 251, e.value.details
        assert root.app.t.count_documents({}) == 1, "not committed by ann"
        s.commit_transaction()
        assert root.app.t.count_documents({}) == 2
        s.end_session()


def test_the_oplog_lsid_carries_the_users_digest(tmp_path):
    srv = Server(tmp_path / "member", args=["--replSet", REPL_SET])
    try:
        with srv.client() as c:
            c.admin.command("replSetInitiate")
        with srv.client(replicaSet=REPL_SET, directConnection=False) as c:
            c.app.o.insert_one({"_id": 0})
            with c.start_session() as s:
                with s.start_transaction():
                    c.app.o.insert_one({"_id": 1}, session=s)
                c.app.o.insert_one({"_id": 2}, session=s)  # a retryable write
            got = list(c.local["oplog.rs"].find({"lsid": {"$exists": True}}).sort("$natural", 1))
            # Every retryable insert and the transaction's applyOps.
            assert {e["op"] for e in got} == {"i", "c"}, got
            for e in got:
                assert set(e["lsid"]) == {"id", "uid"}, e["lsid"]
                assert e["lsid"]["uid"] == NO_AUTH_UID
    finally:
        srv.stop()


def test_max_sessions_refuses_a_new_session_past_the_limit(tmp_path):
    srv = Server(tmp_path / "data", args=["--setParameter", "maxSessions=2"])
    try:
        with RawConnection(srv.port) as conn:
            assert conn.command({"getParameter": 1, "maxSessions": 1, "$db": "admin"}).doc["maxSessions"] == 2
            held = [{"id": Binary.from_uuid(uuid.uuid4())} for _ in range(2)]
            for lsid in held:
                assert conn.command({"ping": 1, "lsid": lsid, "$db": "admin"}).doc["ok"] == 1.0
            r = conn.command({"ping": 1, "lsid": {"id": Binary.from_uuid(uuid.uuid4())}, "$db": "admin"})
            assert (r.doc["ok"], r.doc.get("code"), r.doc.get("codeName")) == (0.0, 261, "TooManyLogicalSessions")
            r = conn.command({"startSession": 1, "$db": "admin"})
            assert r.doc.get("code") == 261, r.doc
            # The held ones still work; ending one makes room.
            assert conn.command({"find": "c", "lsid": held[0], "$db": "app"}).doc["ok"] == 1.0
            assert conn.command({"endSessions": [held[1]], "$db": "admin"}).doc["ok"] == 1.0
            assert conn.command({"startSession": 1, "$db": "admin"}).doc["ok"] == 1.0
    finally:
        srv.stop()
