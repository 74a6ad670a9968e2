"""Deeply nested documents in every carrier (a command field, an inserted document, a find
filter and projection, an update spec, a pipeline stage, an expression) at depths from 50 to
1,000,000: the server refuses what passes mongod's limits with mongod's code (Overflow, 15:
200 levels for anything received, 180 for a stored document) and answers `ping` afterwards.
The documents are built as raw bytes, since a driver's encoder recurses per level itself."""

import struct

import pytest
from bson import decode, encode

from wire_client import OP_MSG, RawConnection, read_reply

OVERFLOW = 15
MAX_WIRE_DEPTH = 200
MAX_STORAGE_DEPTH = 180
DEPTHS = [50, 100, 101, 180, 181, 200, 1000, 100_000, 1_000_000]


def nested(levels: int, keys: list[str]) -> bytes:
    """`{k0: {k1: ... {kN: 1}}}` with `levels` documents (keys cycled), built without
    recursion: the length of each level is known from the levels below it."""
    names = [keys[i % len(keys)].encode() + b"\x00" for i in range(levels)]
    # Size of the level-i document: 4 (length) + its element + 1 (terminator).
    sizes = [0] * levels
    sizes[-1] = 4 + 1 + len(names[-1]) + 4 + 1
    for i in range(levels - 2, -1, -1):
        sizes[i] = 4 + 1 + len(names[i]) + sizes[i + 1] + 1
    parts = []
    for i in range(levels - 1):
        parts.append(struct.pack("<i", sizes[i]) + b"\x03" + names[i])
    parts.append(struct.pack("<i", sizes[-1]) + b"\x10" + names[-1] + struct.pack("<i", 1))
    parts.append(b"\x00" * levels)
    return b"".join(parts)


def element(name: str, raw_doc: bytes) -> bytes:
    return b"\x03" + name.encode() + b"\x00" + raw_doc


def array_of(raw_doc: bytes) -> bytes:
    """A raw BSON array body holding one document."""
    body = b"\x030\x00" + raw_doc
    return struct.pack("<i", 4 + len(body) + 1) + body + b"\x00"


def document(fields: bytes) -> bytes:
    return struct.pack("<i", 4 + len(fields) + 1) + fields + b"\x00"


def with_deep(prefix: dict, deep_element: bytes, suffix: dict) -> bytes:
    """A command document: `prefix` fields, one raw element, then `suffix` fields."""
    head = encode(prefix)[4:-1]
    tail = encode(suffix)[4:-1]
    return document(head + deep_element + tail)


def carriers(depth: int):
    """(name, command bytes, levels above the deep document in the command, stored?)."""
    plain = nested(depth, ["a"])
    db = {"$db": "nest"}
    yield "ping", with_deep({"ping": 1}, element("x", plain), db), 1, False
    yield (
        "insert",
        with_deep({"insert": "c"}, b"\x04documents\x00" + array_of(plain), db),
        2,
        True,
    )
    elem_match = nested(depth, ["a", "$elemMatch"])
    yield "find filter", with_deep({"find": "c"}, element("filter", elem_match), db), 1, False
    yield "projection", with_deep({"find": "c"}, element("projection", plain), db), 1, False
    update = document(element("q", encode({})) + element("u", document(element("$set", plain))))
    updates = b"\x04updates\x00" + array_of(update)
    yield "update spec", with_deep({"update": "c"}, updates, db), 4, True
    stage = document(element("$match", elem_match))
    yield "pipeline", with_deep(
        {"aggregate": "c"}, b"\x04pipeline\x00" + array_of(stage), {"cursor": {}, **db}
    ), 3, False
    abs_chain = nested(depth, ["$abs"])
    project = document(element("$project", document(element("x", abs_chain))))
    yield "expression", with_deep(
        {"aggregate": "c"}, b"\x04pipeline\x00" + array_of(project), {"cursor": {}, **db}
    ), 4, False


def send(conn: RawConnection, body: bytes) -> dict:
    payload = struct.pack("<I", 0) + b"\x00" + body
    conn.send(struct.pack("<iiii", 16 + len(payload), conn.next_id, 0, OP_MSG) + payload)
    conn.next_id += 1
    return read_reply(conn.sock).doc


@pytest.mark.parametrize("depth", DEPTHS)
def test_nesting_in_every_carrier_is_bounded(server, depth):
    with RawConnection(server.port) as conn:
        conn.sock.settimeout(60)
        conn.command({"insert": "c", "documents": [{"_id": 0, "a": [1]}], "$db": "nest"})
        for name, body, above, stored in carriers(depth):
            reply = send(conn, body)
            total = above + depth
            if total > MAX_WIRE_DEPTH:
                assert reply.get("code") == OVERFLOW, (name, depth, reply)
                assert reply["codeName"] == "Overflow"
                assert "nested object depth" in reply["errmsg"]
            elif stored and depth > MAX_STORAGE_DEPTH:
                errors = reply.get("writeErrors", [])
                assert errors and errors[0]["code"] == OVERFLOW, (name, depth, reply)
                assert str(MAX_STORAGE_DEPTH) in errors[0]["errmsg"]
            else:
                # Within the limits the command runs: it may still fail for its own reasons
                # (an expression that is not a number), but never for depth.
                assert reply.get("code") != OVERFLOW, (name, depth, reply)
                assert "writeErrors" not in reply or all(
                    e["code"] != OVERFLOW for e in reply["writeErrors"]
                ), (name, depth, reply)
            assert conn.command({"ping": 1}).doc["ok"] == 1.0, (name, depth)
    with RawConnection(server.port) as other:
        assert other.command({"ping": 1}).doc["ok"] == 1.0
    assert server.proc.poll() is None


def test_an_update_cannot_build_a_document_deeper_than_storage_allows(client):
    coll = client.nest.deep
    coll.insert_one({"_id": 1})
    # Each statement is shallow on the wire; the dotted path builds the depth.
    path = ".".join(["a"] * (MAX_STORAGE_DEPTH + 5))
    with pytest.raises(Exception) as info:
        coll.update_one({"_id": 1}, {"$set": {path: 1}})
    assert getattr(info.value, "code", None) == OVERFLOW, info.value
    assert coll.find_one({"_id": 1}) == {"_id": 1}
    assert client.admin.command("ping")["ok"] == 1.0


def test_a_stored_document_at_the_limit_round_trips(client):
    coll = client.nest.limit
    raw = nested(MAX_STORAGE_DEPTH - 1, ["a"])
    # `{_id: 1, a: <179 levels>}`: 180 levels in all.
    doc = decode(document(b"\x10_id\x00" + struct.pack("<i", 1) + element("a", raw)))
    coll.insert_one(doc)
    assert coll.find_one({"_id": 1}) == doc


@pytest.mark.parametrize("components", [1000, 100_000])
def test_long_dotted_paths_are_refused_not_recursed(client, components):
    """Paths are strings, so the wire scan does not bound them: every builder that recurses
    per component refuses paths longer than mongod's FieldPath (200 components)."""
    coll = client.nest.paths
    coll.insert_one({"_id": 1, "a": 1})
    path = ".".join(["b"] * components)
    expect = {
        "find projection": (lambda: list(coll.find({}, {path: 1})), 5729100),
        "$project": (lambda: list(coll.aggregate([{"$project": {path: 1}}])), 5729100),
        "$addFields": (lambda: list(coll.aggregate([{"$addFields": {path: 1}}])), 5729100),
        "$set": (lambda: coll.update_one({"_id": 1}, {"$set": {path: 1}}), OVERFLOW),
        "$inc": (lambda: coll.update_one({"_id": 1}, {"$inc": {path: 1}}), OVERFLOW),
        "upsert seed": (
            lambda: coll.update_one({path: 5}, {"$set": {"z": 1}}, upsert=True),
            OVERFLOW,
        ),
    }
    for name, (run, code) in expect.items():
        with pytest.raises(Exception) as info:
            run()
        assert getattr(info.value, "code", None) == code, (name, info.value)
        assert client.admin.command("ping")["ok"] == 1.0, name
    # Paths that only read stay fine at any length.
    assert list(coll.find({path: 1})) == []
    assert coll.find_one({}, sort=[(path, 1)])["_id"] == 1


def test_pipelines_cannot_build_documents_past_the_limit(client):
    coll = client.nest.pipe
    coll.insert_one({"_id": 1})
    wrap = {"$project": {"x": "$$ROOT"}}
    assert len(list(coll.aggregate([wrap] * 150))) == 1
    with pytest.raises(Exception) as info:
        list(coll.aggregate([wrap] * 1000))
    assert info.value.code == OVERFLOW
    with pytest.raises(Exception) as info:
        list(coll.aggregate([{"$match": {}}] * 1001))
    assert info.value.code == 7749501
    with pytest.raises(Exception) as info:
        coll.create_index([(f"f{i}", 1) for i in range(33)])
    assert info.value.code == 67
    assert client.admin.command("ping")["ok"] == 1.0
