"""A cursor belongs to the session it was opened in (issue 24 item 2): a getMore from
another session, or without one, is refused with mongod's codes, and ending or killing the
session closes the cursor."""

import uuid

import pytest
from bson import Binary

from wire_client import RawConnection

CURSOR_NOT_FOUND = 43


def lsid() -> dict:
    return {"id": Binary.from_uuid(uuid.uuid4())}


def open_cursor(conn: RawConnection, session: dict | None) -> int:
    cmd = {"find": "c", "batchSize": 1, "$db": "sess"}
    if session is not None:
        cmd["lsid"] = session
    r = conn.command(cmd)
    assert r.doc["ok"] == 1.0, r.doc
    assert r.doc["cursor"]["id"] != 0
    return r.doc["cursor"]["id"]


def get_more(conn: RawConnection, cursor: int, session: dict | None) -> dict:
    cmd = {"getMore": cursor, "collection": "c", "batchSize": 1, "$db": "sess"}
    if session is not None:
        cmd["lsid"] = session
    return conn.command(cmd).doc


@pytest.mark.parametrize("end", ["endSessions", "killSessions"])
def test_a_cursor_is_its_sessions_and_ends_with_it(server, end):
    client = server.client()
    client.sess.c.insert_many([{"_id": i} for i in range(10)])
    client.close()
    a, b = lsid(), lsid()
    with RawConnection(server.port) as conn:
        cursor = open_cursor(conn, a)
        r = get_more(conn, cursor, b)
        assert r["code"] == 50738, r
        assert f"Cannot run getMore on cursor {cursor}, which was created in session" in r["errmsg"]
        assert r["errmsg"].endswith(" -  - ")
        assert get_more(conn, cursor, None)["code"] == 50737
        assert get_more(conn, cursor, a)["cursor"]["nextBatch"] == [{"_id": 1}]
        plain = open_cursor(conn, None)
        assert get_more(conn, plain, a)["code"] == 50736
        # Another session's cursor, and a plain one, outlive the ended session.
        other = open_cursor(conn, b)
        assert conn.command({end: [a], "$db": "admin"}).doc["ok"] == 1.0
        assert get_more(conn, cursor, a)["code"] == CURSOR_NOT_FOUND
        assert get_more(conn, other, b)["cursor"]["nextBatch"] == [{"_id": 1}]
        assert get_more(conn, plain, None)["cursor"]["nextBatch"] == [{"_id": 1}]


def test_pymongo_cursors_end_with_their_explicit_session(server):
    client = server.client()
    client.sess.c.insert_many([{"_id": i} for i in range(10)])
    session = client.start_session()
    cursor = client.sess.c.find({}, batch_size=2, session=session)
    assert next(cursor) == {"_id": 0}
    with RawConnection(server.port) as conn:
        r = conn.command({"killAllSessionsByPattern": [{"lsid": session.session_id}], "$db": "admin"})
        assert r.doc["ok"] == 1.0, r.doc
    next(cursor)  # the first batch is still in hand
    with pytest.raises(Exception) as raised:
        list(cursor)
    assert getattr(raised.value, "code", None) == CURSOR_NOT_FOUND
    session.end_session()
    client.close()
