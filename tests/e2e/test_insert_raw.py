"""Documents of an insert's OP_MSG document sequence go to the engine as they came: never
decoded, but validated by the wire layer (structure, UTF-8, depth). Field names are kept
as sent, duplicates included, as mongod keeps them; a second `_id` is refused as mongod
refuses it."""

import struct

from bson import encode
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument

from wire_client import OP_MSG, RawConnection, read_reply


def insert_with_sequence(conn: RawConnection, db: str, coll: str, docs: list[bytes]) -> dict:
    body = struct.pack("<I", 0) + b"\x00" + encode({"insert": coll, "$db": db})
    seq = b"documents\x00" + b"".join(docs)
    body += b"\x01" + struct.pack("<i", 4 + len(seq)) + seq
    conn.send(struct.pack("<iiii", 16 + len(body), conn.next_id, 0, OP_MSG) + body)
    conn.next_id += 1
    return read_reply(conn.sock).doc


def raw_doc(fields: bytes) -> bytes:
    return struct.pack("<i", 4 + len(fields) + 1) + fields + b"\x00"


def int_field(name: str, v: int) -> bytes:
    return b"\x10" + name.encode() + b"\x00" + struct.pack("<i", v)


def test_sequence_documents_are_stored_as_sent(server, client):
    with RawConnection(server.port) as conn:
        docs = [encode({"_id": i, "a": {"b": [i, "x"]}}) for i in range(5)]
        # No `_id`: the server generates one and puts it first.
        docs.append(encode({"n": 7}))
        # A duplicate field name other than `_id` is kept as sent.
        docs.append(raw_doc(int_field("_id", 100) + int_field("d", 1) + int_field("d", 2)))
        reply = insert_with_sequence(conn, "raw", "c", docs)
        assert reply["ok"] == 1.0 and reply["n"] == 7, reply
    coll = client.raw.c
    assert coll.find_one({"_id": 3}) == {"_id": 3, "a": {"b": [3, "x"]}}
    generated = coll.find_one({"n": 7})
    assert list(generated) == ["_id", "n"]
    # Both `d` fields come back as stored (a decoding driver would collapse them).
    raw = coll.with_options(codec_options=CodecOptions(document_class=RawBSONDocument))
    stored = raw.find_one({"_id": 100}).raw
    assert stored == raw_doc(int_field("_id", 100) + int_field("d", 1) + int_field("d", 2))


def test_bad_sequence_documents_are_refused(server, client):
    with RawConnection(server.port) as conn:
        two_ids = raw_doc(int_field("_id", 1) + int_field("_id", 2))
        reply = insert_with_sequence(conn, "raw", "bad", [two_ids])
        assert reply["writeErrors"][0]["code"] == 2, reply
        bad_utf8 = raw_doc(b"\x02s\x00" + struct.pack("<i", 3) + b"\xff\xfe\x00")
        reply = insert_with_sequence(conn, "raw", "bad", [bad_utf8])
        assert reply["ok"] == 0.0 and reply["code"] == 22, reply
        assert conn.command({"ping": 1}).doc["ok"] == 1.0
    assert client.raw.bad.count_documents({}) == 0
