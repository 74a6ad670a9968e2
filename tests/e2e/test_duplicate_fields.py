"""Duplicate field names (issue 29 item 5), answered as mongod 7.0 answers them, never
collapsed silently:
- a document to insert keeps a repeated field name as sent, whether it came in the
  command's body or in a document sequence (mongod stores it: SERVER-6439 is unresolved);
- a second `_id` is refused, `BadValue` (2) "can't have multiple _id fields in one
  document" (mongod's `fixDocumentForInsert`, SERVER-19361), a write error at its index;
- a field given twice in a command that mongod parses with its IDL parsers (every CRUD and
  DDL command) fails the command, `Location40413` "BSON field 'insert.ordered' is a
  duplicate field"; the command's own name again is an unknown field (`Location40415`);
- other commands read a repeated field's first value, as mongod's hand-written parsers do;
- an update operator given twice applies both (`update`, `findAndModify`); a field given
  twice within an operator is `ConflictingUpdateOperators` (40);
- an update's replacement document is stored as sent, upserted ones too; a second `_id` in
  it is `BadValue` (2) "Can't have multiple _id fields in one document" (mongod's
  `storage_validation::scanDocument`);
- a field given twice inside an `update` or `delete` statement fails the command with
  `Location40413` "BSON field 'update.updates.q' is a duplicate field" (mongod parses the
  statements with IDL before any runs);
- the legacy OP_INSERT stores its documents as sent, and OP_UPDATE reads its update as the
  `update` command does;
- a filter that names a field twice is the AND of both conditions (find, count, distinct,
  update/delete/findAndModify, `$match` at any depth of a pipeline, `explain`'s inner
  command, the legacy OP_QUERY), and so is a field's operator document that names an
  operator twice (`{a: {$gt: 3, $gt: 1}}`), or a name repeated below `$not` or
  `$elemMatch`; every `$regex` of an operator document reads its last pattern;
- a command sent over OP_QUERY on `<db>.$cmd` is read as sent, as over OP_MSG;
- a view's `$match` is stored as the AND it means;
- a stored document that repeats a name keeps every occurrence through an update (the
  operators reach the first), and `aggregate` returns it as stored.
Commands are sent as raw OP_MSG bodies and legacy messages are built by hand: a driver's
dictionaries cannot hold a name twice."""

import struct

from bson import encode
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument

from legacy_client import OP_INSERT, OP_QUERY, OP_UPDATE, LegacyClient
from wire_client import OP_MSG, RawConnection, read_reply


def element(name: str, value) -> bytes:
    """One BSON element, as `encode` writes it inside a document."""
    return encode({name: value})[4:-1]


def raw_element(name: str, raw_document: bytes) -> bytes:
    """An element whose value is a document given as its bytes (names may repeat in it)."""
    return b"\x03" + name.encode() + b"\x00" + raw_document


def document(*elements: bytes) -> bytes:
    fields = b"".join(elements)
    return struct.pack("<i", 4 + len(fields) + 1) + fields + b"\x00"


def array_of(*docs: bytes) -> bytes:
    items = b"".join(b"\x03" + str(i).encode() + b"\x00" + d for i, d in enumerate(docs))
    return document(items)


def array_element(name: str, *docs: bytes) -> bytes:
    return b"\x04" + name.encode() + b"\x00" + array_of(*docs)


def command(conn: RawConnection, *elements: bytes) -> dict:
    """Sends one OP_MSG whose body is `elements` in order (`$db` added last)."""
    body = document(*elements, element("$db", "dup"))
    msg = struct.pack("<I", 0) + b"\x00" + body
    conn.send(struct.pack("<iiii", 16 + len(msg), conn.next_id, 0, OP_MSG) + msg)
    conn.next_id += 1
    return read_reply(conn.sock).doc


def stored(client, coll: str, _id) -> bytes | None:
    raw = client.dup.get_collection(coll, CodecOptions(document_class=RawBSONDocument))
    found = raw.find_one({"_id": _id})
    return None if found is None else found.raw


def test_a_document_keeps_a_repeated_field_name_as_sent(server, client):
    doc = document(element("_id", 7), element("a", 1), element("a", 2), element("b", 3))
    with RawConnection(server.port) as conn:
        reply = command(conn, element("insert", "c"), array_element("documents", doc))
    assert reply["ok"] == 1.0 and reply["n"] == 1, reply
    assert stored(client, "c", 7) == doc


def test_a_second_id_is_a_write_error_where_mongod_has_one(server, client):
    ok = lambda i: document(element("_id", i), element("x", 1))  # noqa: E731
    two_ids = document(element("_id", 7), element("a", 1), element("a", 2), element("_id", 8))
    with RawConnection(server.port) as conn:
        ordered = command(conn, element("insert", "o"), array_element("documents", ok(1), two_ids, ok(2)))
        unordered = command(
            conn,
            element("insert", "u"),
            array_element("documents", ok(1), two_ids, ok(2)),
            element("ordered", False),
        )
    for reply, n in ((ordered, 1), (unordered, 2)):
        assert reply["ok"] == 1.0 and reply["n"] == n, reply
        [e] = reply["writeErrors"]
        assert (e["index"], e["code"]) == (1, 2), e
        assert e["errmsg"] == "can't have multiple _id fields in one document", e
    for coll in ("o", "u"):
        assert stored(client, coll, 7) is None and stored(client, coll, 8) is None
    assert stored(client, "o", 2) is None and stored(client, "u", 2) is not None


def test_a_field_given_twice_fails_a_command_mongod_parses_with_idl(server, client):
    doc = document(element("_id", 1))
    with RawConnection(server.port) as conn:
        reply = command(
            conn,
            element("insert", "c"),
            array_element("documents", doc),
            element("ordered", True),
            element("ordered", False),
        )
        assert reply["ok"] == 0.0 and reply["code"] == 40413, reply
        assert reply["errmsg"] == "BSON field 'insert.ordered' is a duplicate field", reply
        assert reply["codeName"] == "Location40413", reply

        reply = command(
            conn,
            element("find", "c"),
            element("filter", {"_id": 1}),
            element("filter", {"_id": 2}),
        )
        assert reply["ok"] == 0.0 and reply["code"] == 40413, reply
        assert reply["errmsg"] == "BSON field 'find.filter' is a duplicate field", reply

        reply = command(conn, element("insert", "c"), element("insert", "d"), array_element("documents", doc))
        assert reply["ok"] == 0.0 and reply["code"] == 40415, reply
        assert reply["errmsg"] == "BSON field 'insert.insert' is an unknown field.", reply

        # A command mongod parses by hand reads the first value.
        reply = command(conn, element("ping", 1), element("comment", "a"), element("comment", "b"))
        assert reply["ok"] == 1.0, reply
    assert client.dup.c.count_documents({}) == 0
    assert "d" not in client.dup.list_collection_names()


def test_an_update_operator_given_twice_applies_both(server, client):
    """`{$set: {a: 1}, $set: {b: 2}}`: mongod applies both; decoding the update into a
    dictionary kept only the second (`a` was silently not set)."""
    client.dup.ops.insert_many([{"_id": 1, "n": 0}, {"_id": 2, "n": 0}])
    twice = document(
        element("$set", {"a": 1}),
        element("$inc", {"n": 5}),
        element("$set", {"b": 2}),
    )
    statement = document(element("q", {"_id": 1}), raw_element("u", twice))
    with RawConnection(server.port) as conn:
        reply = command(conn, element("update", "ops"), array_element("updates", statement))
        assert reply["ok"] == 1.0 and reply["n"] == 1 and reply["nModified"] == 1, reply
        assert "writeErrors" not in reply, reply

        reply = command(
            conn,
            element("findAndModify", "ops"),
            element("query", {"_id": 2}),
            raw_element("update", twice),
            element("new", True),
        )
        assert reply["ok"] == 1.0, reply
        assert reply["value"] == {"_id": 2, "n": 5, "a": 1, "b": 2}, reply
    assert client.dup.ops.find_one({"_id": 1}) == {"_id": 1, "n": 5, "a": 1, "b": 2}


def test_an_update_field_given_twice_is_mongods_conflict(server, client):
    """`{$set: {a: 1, a: 2}}` and `{$set: {a: 1}, $set: {a: 2}}`: ConflictingUpdateOperators
    (40) as mongod reports a path set twice, a write error of that statement only."""
    client.dup.conflict.insert_one({"_id": 1})
    inner = document(raw_element("$set", document(element("a", 1), element("a", 2))))
    across = document(element("$set", {"a.b": 1}), element("$set", {"a.b": 2}))
    fine = document(element("$set", {"ok": True}))
    statements = [
        document(element("q", {"_id": 1}), raw_element("u", u)) for u in (inner, fine, across)
    ]
    with RawConnection(server.port) as conn:
        reply = command(
            conn,
            element("update", "conflict"),
            array_element("updates", *statements),
            element("ordered", False),
        )
        assert reply["ok"] == 1.0 and reply["n"] == 1, reply
        errors = [(e["index"], e["code"], e["errmsg"]) for e in reply["writeErrors"]]
        assert errors == [
            (0, 40, "Updating the path 'a' would create a conflict at 'a'"),
            (2, 40, "Updating the path 'a.b' would create a conflict at 'a.b'"),
        ], reply

        reply = command(
            conn,
            element("findAndModify", "conflict"),
            element("query", {"_id": 1}),
            raw_element("update", inner),
        )
        assert reply["ok"] == 0.0 and reply["code"] == 40, reply
        assert reply["codeName"] == "ConflictingUpdateOperators", reply
    assert client.dup.conflict.find_one({"_id": 1}) == {"_id": 1, "ok": True}


def test_a_replacement_keeps_a_repeated_field_name_as_sent(server, client):
    """`update` and `findAndModify` replacements, upserted or not, stored as sent; decoding
    one into a dictionary kept only the last `a`."""
    client.dup.r.insert_many([{"_id": 1, "x": 0}, {"_id": 2, "x": 0}])
    replacement = document(element("a", 1), element("b", 2), element("a", 3))
    with RawConnection(server.port) as conn:
        statements = [
            document(element("q", {"_id": 1}), raw_element("u", replacement)),
            document(element("q", {"_id": 3}), raw_element("u", replacement), element("upsert", True)),
        ]
        reply = command(conn, element("update", "r"), array_element("updates", *statements))
        assert reply["ok"] == 1.0 and reply["n"] == 2 and reply["nModified"] == 1, reply
        assert reply["upserted"] == [{"index": 1, "_id": 3}], reply
        for _id in (2, 4):
            reply = command(
                conn,
                element("findAndModify", "r"),
                element("query", {"_id": _id}),
                raw_element("update", replacement),
                element("upsert", True),
            )
            assert reply["ok"] == 1.0, reply
    for _id in (1, 2, 3, 4):
        assert stored(client, "r", _id) == document(element("_id", _id), replacement[4:-1]), _id


def test_a_second_id_in_a_replacement_is_refused(server, client):
    """mongod validates a replaced document for storage: a second `_id` is `BadValue` (2),
    a write error of that statement (a command error of `findAndModify`); decoding kept the
    last `_id` and stored the document."""
    client.dup.ids.insert_one({"_id": 1, "x": 0})
    two_ids = document(element("_id", 1), element("a", 1), element("_id", 1))
    with RawConnection(server.port) as conn:
        statements = [
            document(element("q", {"_id": 1}), raw_element("u", two_ids)),
            document(element("q", {"_id": 5}), raw_element("u", two_ids), element("upsert", True)),
            document(element("q", {"_id": 1}), element("u", {"$set": {"ok": True}})),
        ]
        reply = command(
            conn,
            element("update", "ids"),
            array_element("updates", *statements),
            element("ordered", False),
        )
        assert reply["ok"] == 1.0 and reply["n"] == 1 and reply["nModified"] == 1, reply
        errors = [(e["index"], e["code"], e["errmsg"]) for e in reply["writeErrors"]]
        message = "Can't have multiple _id fields in one document"
        assert errors == [(0, 2, message), (1, 2, message)], reply
        for query in ({"_id": 1}, {"_id": 6}):
            reply = command(
                conn,
                element("findAndModify", "ids"),
                element("query", query),
                raw_element("update", two_ids),
                element("upsert", True),
            )
            assert reply["ok"] == 0.0 and reply["code"] == 2, reply
            assert reply["errmsg"] == message, reply
    assert list(client.dup.ids.find()) == [{"_id": 1, "x": 0, "ok": True}]


def test_a_field_given_twice_in_a_statement_fails_the_command(server, client):
    """mongod parses `updates` and `deletes` with IDL before running any statement: a field
    given twice in one is `Location40413` and nothing is written; decoding kept the last
    value and ran the statement (an upsert turned off, a delete of every document)."""
    client.dup.s.insert_many([{"_id": 1}, {"_id": 2}])
    fine = document(element("q", {"_id": 1}), element("u", {"$set": {"a": 1}}))
    twice = {
        "q": document(element("q", {"_id": 1}), element("u", {"$set": {"a": 1}}), element("q", {"_id": 2})),
        "u": document(element("q", {"_id": 2}), element("u", {"$set": {"a": 1}}), element("u", {"$set": {"b": 1}})),
        "upsert": document(
            element("q", {"_id": 9}),
            element("u", {"$set": {"a": 1}}),
            element("upsert", True),
            element("upsert", False),
        ),
    }
    with RawConnection(server.port) as conn:
        for field, statement in twice.items():
            for ordered in (True, False):
                reply = command(
                    conn,
                    element("update", "s"),
                    array_element("updates", fine, statement),
                    element("ordered", ordered),
                )
                assert reply["ok"] == 0.0 and reply["code"] == 40413, reply
                assert reply["codeName"] == "Location40413", reply
                assert reply["errmsg"] == f"BSON field 'update.updates.{field}' is a duplicate field", reply

        limit_twice = document(element("q", {}), element("limit", 1), element("limit", 0))
        reply = command(conn, element("delete", "s"), array_element("deletes", limit_twice))
        assert reply["ok"] == 0.0 and reply["code"] == 40413, reply
        assert reply["errmsg"] == "BSON field 'delete.deletes.limit' is a duplicate field", reply
    assert list(client.dup.s.find()) == [{"_id": 1}, {"_id": 2}]


def legacy_insert(c: LegacyClient, ns: str, *docs: bytes, flags: int = 0) -> None:
    c.raw(OP_INSERT, struct.pack("<i", flags) + ns.encode() + b"\x00" + b"".join(docs))


def legacy_update(c: LegacyClient, ns: str, selector: bytes, update: bytes, flags: int = 0) -> None:
    body = struct.pack("<i", 0) + ns.encode() + b"\x00" + struct.pack("<i", flags)
    c.raw(OP_UPDATE, body + selector + update)


def test_op_insert_keeps_its_documents_as_sent(server, client):
    """The legacy OP_INSERT stores each document as the OP_MSG insert does; decoding kept
    the last `a` and the last `_id`."""
    c = LegacyClient(server.port)
    try:
        doc = document(element("_id", 1), element("a", 1), element("a", 2), element("b", 3))
        legacy_insert(c, "dup.legacy", doc)
        gle = c.command("dup", {"getLastError": 1})
        assert gle["err"] is None and gle["n"] == 0, gle
        two_ids = document(element("_id", 2), element("a", 1), element("_id", 3))
        legacy_insert(c, "dup.legacy", two_ids)
        gle = c.command("dup", {"getLastError": 1})
        assert gle["code"] == 2, gle
        assert gle["err"] == "can't have multiple _id fields in one document", gle
    finally:
        c.close()
    assert stored(client, "legacy", 1) == doc
    assert client.dup.legacy.count_documents({}) == 1


def test_op_update_reads_its_update_as_sent(server, client):
    """The legacy OP_UPDATE's replacement is stored as sent (upserted too), and its operator
    document is read as the `update` command reads one."""
    client.dup.lu.insert_many([{"_id": 1, "x": 0}, {"_id": 2, "n": 0}, {"_id": 3}])
    replacement = document(element("a", 1), element("a", 2))
    operators = document(element("$set", {"a": 1}), element("$inc", {"n": 5}), element("$set", {"b": 2}))
    conflict = document(raw_element("$set", document(element("c", 1), element("c", 2))))
    c = LegacyClient(server.port)
    try:
        legacy_update(c, "dup.lu", encode({"_id": 1}), replacement)
        gle = c.command("dup", {"getLastError": 1})
        assert gle["err"] is None and gle["n"] == 1 and gle["updatedExisting"], gle
        legacy_update(c, "dup.lu", encode({"_id": 4}), replacement, flags=1)
        gle = c.command("dup", {"getLastError": 1})
        assert gle["err"] is None and gle["upserted"] == 4, gle
        legacy_update(c, "dup.lu", encode({"_id": 2}), operators)
        assert c.command("dup", {"getLastError": 1})["err"] is None
        legacy_update(c, "dup.lu", encode({"_id": 3}), conflict)
        gle = c.command("dup", {"getLastError": 1})
        assert gle["code"] == 40, gle
        assert gle["err"] == "Updating the path 'c' would create a conflict at 'c'", gle
    finally:
        c.close()
    for _id in (1, 4):
        assert stored(client, "lu", _id) == document(element("_id", _id), replacement[4:-1]), _id
    assert client.dup.lu.find_one({"_id": 2}) == {"_id": 2, "n": 5, "a": 1, "b": 2}
    assert client.dup.lu.find_one({"_id": 3}) == {"_id": 3}


def test_a_filter_naming_a_field_twice_is_the_and_of_both(server, client):
    """`{a: {$gte: 1}, a: {$lte: 2}}` matches what both conditions match, as mongod's
    matcher reads every element of a filter (`find`, and the filters of `update`,
    `findAndModify` and `delete`); decoding kept only the last condition."""
    client.dup.f.insert_many([{"_id": i, "a": i} for i in range(4)])
    filters = [
        (document(element("a", {"$gte": 1}), element("a", {"$lte": 2})), [1, 2]),
        (document(element("_id", {"$gte": 1}), element("_id", {"$lte": 2})), [1, 2]),
        (document(element("_id", 1), element("_id", 2)), []),
    ]
    with RawConnection(server.port) as conn:
        for both, want in filters:
            reply = command(conn, element("find", "f"), raw_element("filter", both), element("sort", {"_id": 1}))
            assert reply["ok"] == 1.0, reply
            assert [d["_id"] for d in reply["cursor"]["firstBatch"]] == want, reply

        a_in_1_2 = filters[0][0]
        statement = document(raw_element("q", a_in_1_2), element("u", {"$set": {"u": 1}}), element("multi", True))
        reply = command(conn, element("update", "f"), array_element("updates", statement))
        assert reply["ok"] == 1.0 and reply["n"] == 2, reply
        reply = command(
            conn,
            element("findAndModify", "f"),
            raw_element("query", a_in_1_2),
            element("sort", {"_id": 1}),
            element("update", {"$set": {"fam": 1}}),
        )
        assert reply["ok"] == 1.0 and reply["value"]["_id"] == 1, reply
        statement = document(raw_element("q", a_in_1_2), element("limit", 0))
        reply = command(conn, element("delete", "f"), array_element("deletes", statement))
        assert reply["ok"] == 1.0 and reply["n"] == 2, reply
    assert list(client.dup.f.find()) == [{"_id": 0, "a": 0}, {"_id": 3, "a": 3}]


def test_count_and_distinct_read_a_filter_naming_a_field_twice_as_the_and_of_both(server, client):
    """`count`'s and `distinct`'s `query` as `find`'s filter: decoding kept only the last
    condition (count 3 and values [0, 1, 2] instead of 2 and [1, 2])."""
    client.dup.cd.insert_many([{"_id": i, "a": i} for i in range(4)])
    both = document(element("a", {"$gte": 1}), element("a", {"$lte": 2}))
    with RawConnection(server.port) as conn:
        reply = command(conn, element("count", "cd"), raw_element("query", both))
        assert reply["ok"] == 1.0 and reply["n"] == 2, reply
        reply = command(conn, element("distinct", "cd"), element("key", "a"), raw_element("query", both))
        assert reply["ok"] == 1.0 and sorted(reply["values"]) == [1, 2], reply


def test_an_operator_given_twice_for_a_field_is_the_and_of_both(server, client):
    """`{a: {$gt: 3, $gt: 1}}`: mongod's matcher parses every element of a field's operator
    document, so both bounds hold; decoding kept the last (`a > 1`). Wherever filters go."""
    client.dup.ops.insert_many([{"_id": i, "a": i} for i in range(5)])
    gt_twice = document(element("$gt", 3), element("$gt", 1))
    range_twice = document(element("$gte", 3), element("$lte", 4), element("$gte", 1))
    filters = [
        (document(raw_element("a", gt_twice)), [4]),
        (document(raw_element("a", range_twice)), [3, 4]),
        (document(array_element("$or", document(raw_element("a", gt_twice)), document(element("a", 0)))), [0, 4]),
        (document(raw_element("a", gt_twice), element("a", {"$lt": 9})), [4]),
    ]

    def check(conn: RawConnection) -> None:
        for f, want in filters:
            reply = command(conn, element("find", "ops"), raw_element("filter", f), element("sort", {"_id": 1}))
            assert reply["ok"] == 1.0, reply
            assert [d["_id"] for d in reply["cursor"]["firstBatch"]] == want, reply
            reply = command(conn, element("count", "ops"), raw_element("query", f))
            assert reply["ok"] == 1.0 and reply["n"] == len(want), reply
            reply = command(conn, element("distinct", "ops"), element("key", "_id"), raw_element("query", f))
            assert reply["ok"] == 1.0 and sorted(reply["values"]) == want, reply

    with RawConnection(server.port) as conn:
        check(conn)
        client.dup.ops.create_index("a")
        check(conn)  # the same answers through the index's bounds

        a_gt_3 = document(raw_element("a", gt_twice))
        statement = document(raw_element("q", a_gt_3), element("u", {"$set": {"u": 1}}), element("multi", True))
        reply = command(conn, element("update", "ops"), array_element("updates", statement))
        assert reply["ok"] == 1.0 and reply["n"] == 1, reply
        reply = command(
            conn,
            element("findAndModify", "ops"),
            raw_element("query", a_gt_3),
            element("update", {"$set": {"fam": 1}}),
        )
        assert reply["ok"] == 1.0 and reply["value"]["_id"] == 4, reply
        statement = document(raw_element("q", a_gt_3), element("limit", 0))
        reply = command(conn, element("delete", "ops"), array_element("deletes", statement))
        assert reply["ok"] == 1.0 and reply["n"] == 1, reply
    assert [d["_id"] for d in client.dup.ops.find()] == [0, 1, 2, 3]


def test_match_reads_a_filter_naming_a_field_twice_as_the_and_of_both(server, client):
    """An aggregate's `$match` as `find`'s filter, an operator given twice too; the decoded
    pipeline kept the last condition ([0, 1, 2] instead of [1, 2])."""
    client.dup.m.insert_many([{"_id": i, "a": i} for i in range(4)])
    both = document(element("a", {"$gte": 1}), element("a", {"$lte": 2}))
    gt_twice = document(raw_element("a", document(element("$gt", 2), element("$gt", 0))))
    with RawConnection(server.port) as conn:
        for f, want in ((both, [1, 2]), (gt_twice, [3])):
            pipeline = array_element("pipeline", document(raw_element("$match", f)), encode({"$sort": {"_id": 1}}))
            reply = command(conn, element("aggregate", "m"), pipeline, element("cursor", {}))
            assert reply["ok"] == 1.0, reply
            assert [d["_id"] for d in reply["cursor"]["firstBatch"]] == want, reply


def test_op_query_reads_a_filter_naming_a_field_twice_as_the_and_of_both(server, client):
    """A legacy OP_QUERY's filter, plain or wrapped in `$query`, as `find`'s; the decoder
    kept the last condition."""
    client.dup.lq.insert_many([{"_id": i, "a": i} for i in range(4)])
    both = document(element("a", {"$gte": 1}), element("a", {"$lte": 2}))
    wrapped = document(raw_element("$query", both), element("$orderby", {"_id": 1}))
    c = LegacyClient(server.port)
    try:
        for query in (both, wrapped):
            body = struct.pack("<i", 0) + b"dup.lq\x00" + struct.pack("<ii", 0, 0) + query
            reply = c.reply(c.raw(OP_QUERY, body))
            assert reply.flags & 2 == 0, reply
            assert sorted(d["_id"] for d in reply.docs) == [1, 2], reply
    finally:
        c.close()


def test_explain_reads_its_commands_filter_as_the_command_does(server, client):
    """`explain` of find, count, distinct, update, delete, findAndModify and aggregate: the
    inner command's filter is read as sent, a field named twice the AND of both, as the
    command itself reads it; the decoded inner command kept the last condition."""
    client.dup.ex.insert_many([{"_id": i, "a": i} for i in range(4)])
    both = document(element("a", {"$gte": 1}), element("a", {"$lte": 2}))
    parsed = {"$and": [{"a": {"$gte": 1}}, {"a": {"$lte": 2}}]}
    statement = document(raw_element("q", both), element("u", {"$set": {"u": 1}}))
    deletion = document(raw_element("q", both), element("limit", 0))
    match = array_element("pipeline", document(raw_element("$match", both)))
    inner = {
        "find": document(element("find", "ex"), raw_element("filter", both)),
        "count": document(element("count", "ex"), raw_element("query", both)),
        "distinct": document(element("distinct", "ex"), element("key", "a"), raw_element("query", both)),
        "update": document(element("update", "ex"), array_element("updates", statement)),
        "delete": document(element("delete", "ex"), array_element("deletes", deletion)),
        "findAndModify": document(
            element("findAndModify", "ex"), raw_element("query", both), element("remove", True)
        ),
        "aggregate": document(element("aggregate", "ex"), match, element("cursor", {})),
    }
    with RawConnection(server.port) as conn:
        for name, body in inner.items():
            reply = command(conn, raw_element("explain", body), element("verbosity", "executionStats"))
            assert reply["ok"] == 1.0, (name, reply)
            assert reply["queryPlanner"]["parsedQuery"] == parsed, (name, reply)
            if name in ("find", "count", "distinct"):
                assert reply["executionStats"]["nReturned"] == 2, (name, reply)
    assert client.dup.ex.count_documents({}) == 4  # explain ran no write


def legacy_command(c: LegacyClient, db: str, cmd: bytes, wrapped: bool = False) -> dict:
    """A command sent as an OP_QUERY on `<db>.$cmd`, its bytes as given."""
    if wrapped:
        cmd = document(raw_element("$query", cmd), element("$readPreference", {"mode": "primary"}))
    body = struct.pack("<i", 0) + f"{db}.$cmd".encode() + b"\x00" + struct.pack("<ii", 0, -1) + cmd
    reply = c.reply(c.raw(OP_QUERY, body))
    assert len(reply.docs) == 1, reply
    return reply.docs[0]


def test_commands_over_op_query_read_repeats_as_over_op_msg(server, client):
    """A command sent over the legacy OP_QUERY on `<db>.$cmd` reaches the handlers as sent,
    as an OP_MSG body does: a filter naming a field twice is the AND of both, a command
    field given twice is mongod's IDL refusal (40413). Decoded, both kept the last value."""
    client.dup.oq.insert_many([{"_id": i, "a": i} for i in range(4)])
    both = document(element("a", {"$gte": 1}), element("a", {"$lte": 2}))
    find = document(element("find", "oq"), raw_element("filter", both), element("sort", {"_id": 1}))
    count = document(element("count", "oq"), raw_element("query", both))
    twice = document(
        element("insert", "oq"), array_element("documents", encode({"_id": 9})),
        element("ordered", True), element("ordered", False),
    )
    c = LegacyClient(server.port)
    try:
        for wrapped in (False, True):
            reply = legacy_command(c, "dup", find, wrapped)
            assert reply["ok"] == 1.0, reply
            assert [d["_id"] for d in reply["cursor"]["firstBatch"]] == [1, 2], reply
            reply = legacy_command(c, "dup", count, wrapped)
            assert reply["ok"] == 1.0 and reply["n"] == 2, reply
        reply = legacy_command(c, "dup", twice)
        assert reply["ok"] == 0.0 and reply["code"] == 40413, reply
        assert "insert.ordered" in reply["errmsg"], reply
    finally:
        c.close()
    assert client.dup.oq.count_documents({}) == 4


def test_repeats_inside_not_and_elem_match_are_the_and_of_all(server, client):
    """mongod parses every element of `$not`'s operator document and of `$elemMatch`'s
    argument, in both forms: each is the AND of all its elements. Decoded, the last of a
    repeated name was kept."""
    client.dup.ne.insert_many([
        {"_id": 0, "a": 3, "arr": [3, 0], "objs": [{"x": 1}, {"x": 2}]},
        {"_id": 1, "a": 9, "arr": [3, 6], "objs": [{"x": [1, 2]}]},
    ])
    gt_twice = document(element("$gt", 1), element("$gt", 5))
    x_twice = document(element("x", 1), element("x", 2))
    filters = [
        # NOT(a > 1 AND a > 5): a = 3 only (decoded: NOT(a > 5), the same here) ...
        (document(raw_element("a", document(raw_element("$not", gt_twice)))), [0]),
        # ... and NOT(a > 5 AND a < 4) holds for both (decoded: NOT(a < 4), only 9).
        (document(raw_element("a", document(raw_element("$not", document(
            element("$gt", 5), element("$lt", 4), element("$gt", 0)))))), [0, 1]),
        # One element > 4, < 9 and > 0: only [3, 6] (decoded: 0 < e < 9, both).
        (document(raw_element("arr", document(raw_element("$elemMatch", document(
            element("$gt", 4), element("$lt", 9), element("$gt", 0)))))), [1]),
        # One element <= 7, < 2 and < 9: only [3, 0] (decoded: <= 7 and < 9, both).
        (document(raw_element("arr", document(raw_element("$elemMatch", document(
            element("$not", {"$gt": 7}), element("$lt", 2), element("$lt", 9)))))), [0]),
        # One element whose x is 1 and 2: only an array holding both.
        (document(raw_element("objs", document(raw_element("$elemMatch", x_twice)))), [1]),
        # ... and so as an `$all` entry.
        (document(raw_element("objs", document(array_element("$all", document(raw_element("$elemMatch", x_twice)))))), [1]),
    ]
    with RawConnection(server.port) as conn:
        for f, want in filters:
            reply = command(conn, element("find", "ne"), raw_element("filter", f), element("sort", {"_id": 1}))
            assert reply["ok"] == 1.0, reply
            assert [d["_id"] for d in reply["cursor"]["firstBatch"]] == want, (f, reply)


def test_match_inside_facet_lookup_and_union_with_is_read_as_sent(server, client):
    """A `$match` in the pipelines of `$facet`, `$lookup` and `$unionWith` as the top-level
    `$match`: a field named twice is the AND of both (decoded: the last, [0, 1, 2])."""
    client.dup.fm.insert_many([{"_id": i, "a": i} for i in range(4)])
    client.dup.fo.insert_one({"_id": "one"})
    both = document(element("a", {"$gte": 1}), element("a", {"$lte": 2}))
    stages = (document(raw_element("$match", both)), encode({"$project": {"_id": 1}}))
    inner = array_element("pipeline", *stages)
    facet = document(raw_element("$facet", document(array_element("m", *stages))))
    lookup = document(raw_element("$lookup", document(element("from", "fm"), element("as", "j"), inner)))
    union = document(raw_element("$unionWith", document(element("coll", "fm"), inner)))
    with RawConnection(server.port) as conn:
        reply = command(conn, element("aggregate", "fm"), array_element("pipeline", facet), element("cursor", {}))
        assert reply["ok"] == 1.0, reply
        assert sorted(d["_id"] for d in reply["cursor"]["firstBatch"][0]["m"]) == [1, 2], reply
        reply = command(conn, element("aggregate", "fo"), array_element("pipeline", lookup), element("cursor", {}))
        assert reply["ok"] == 1.0, reply
        assert sorted(d["_id"] for d in reply["cursor"]["firstBatch"][0]["j"]) == [1, 2], reply
        reply = command(conn, element("aggregate", "fo"), array_element("pipeline", union), element("cursor", {}))
        assert reply["ok"] == 1.0, reply
        assert sorted(str(d["_id"]) for d in reply["cursor"]["firstBatch"]) == ["1", "2", "one"], reply


def test_a_repeated_regex_is_read_as_mongod_reads_it(server, client):
    """mongod reads every `$regex` of an operator document with the document's last pattern
    and its options (`parseRegexDocument`): `{$regex: "^a", $regex: "^b"}` is `^b`; options
    given twice are refused (51075). Split into runs, each pattern was its own condition."""
    client.dup.rx.insert_many([{"_id": 0, "s": "ab"}, {"_id": 1, "s": "bc"}, {"_id": 2, "s": "Bc"}])
    last = document(raw_element("s", document(element("$regex", "^a"), element("$regex", "^b"))))
    with_options = document(raw_element("s", document(
        element("$regex", "^a"), element("$options", "i"), element("$regex", "^b"))))
    options_twice = document(raw_element("s", document(
        element("$regex", "^b"), element("$options", "i"), element("$options", "m"))))
    with RawConnection(server.port) as conn:
        for f, want in ((last, [1]), (with_options, [1, 2])):
            reply = command(conn, element("find", "rx"), raw_element("filter", f), element("sort", {"_id": 1}))
            assert reply["ok"] == 1.0, reply
            assert [d["_id"] for d in reply["cursor"]["firstBatch"]] == want, (f, reply)
        reply = command(conn, element("find", "rx"), raw_element("filter", options_twice))
        assert reply["ok"] == 0.0 and reply["code"] == 51075, reply


def test_a_views_match_reads_a_field_named_twice_as_the_and_of_both(server, client):
    """A view's pipeline is stored decoded; its `$match` naming a field twice is kept as the
    AND of both (stored decoded before: the last condition, [0, 1, 2])."""
    client.dup.vsrc.insert_many([{"_id": i, "a": i} for i in range(4)])
    both = document(element("a", {"$gte": 1}), element("a", {"$lte": 2}))
    pipeline = array_element("pipeline", document(raw_element("$match", both)))
    with RawConnection(server.port) as conn:
        reply = command(conn, element("create", "vdup"), element("viewOn", "vsrc"), pipeline)
        assert reply["ok"] == 1.0, reply
    assert sorted(d["_id"] for d in client.dup.vdup.find()) == [1, 2]


def test_an_update_of_a_stored_document_keeps_its_repeated_names(server, client):
    """A stored document that repeats a name, updated where the update must decode it (an
    operator on the repeated name, a dotted path, an array operator, a pipeline): the
    operator reaches the first occurrence and the others stay, as mongod's in-place updates
    leave them. Decoding it into a dictionary stored the name once, at its last value."""
    x = document(element("c", 1), element("c", 2))
    doc = document(element("_id", 1), element("a", 1), element("b", {"n": 0}), element("a", 2), raw_element("x", x))
    with RawConnection(server.port) as conn:
        reply = command(conn, element("insert", "sr"), array_element("documents", doc))
        assert reply["ok"] == 1.0 and reply["n"] == 1, reply
    c = client.dup.sr
    c.update_one({"_id": 1}, {"$inc": {"a": 10}})
    c.update_one({"_id": 1}, {"$set": {"b.n": 1, "x.d": 3}})
    c.update_one({"_id": 1}, {"$push": {"arr": 1}})
    c.update_one({"_id": 1}, [{"$set": {"p": 1}}])
    x_after = document(element("c", 1), element("c", 2), element("d", 3))
    want = document(
        element("_id", 1), element("a", 11), element("b", {"n": 1}), element("a", 2),
        raw_element("x", x_after), element("arr", [1]), element("p", 1),
    )
    assert stored(client, "sr", 1) == want
    # findAndModify's update takes the same path.
    after = c.find_one_and_update({"_id": 1}, {"$unset": {"a": ""}}, projection={"_id": 1})
    assert after == {"_id": 1}
    want = document(
        element("_id", 1), element("b", {"n": 1}), element("a", 2),
        raw_element("x", x_after), element("arr", [1]), element("p", 1),
    )
    assert stored(client, "sr", 1) == want


def test_aggregate_returns_a_stored_document_as_stored(server, client):
    """`aggregate`'s reply carries the pipeline's documents as they are, inline or in a
    cursor; decoding them for the reply kept a repeated name once, at its last value."""
    doc = document(element("_id", 1), element("a", 1), element("a", 2))
    with RawConnection(server.port) as conn:
        reply = command(conn, element("insert", "ag"), array_element("documents", doc))
        assert reply["ok"] == 1.0 and reply["n"] == 1, reply
    raw = client.dup.get_collection("ag", CodecOptions(document_class=RawBSONDocument))
    for pipeline in ([], [{"$match": {"a": 1}}], [{"$sort": {"_id": 1}}]):
        assert [d.raw for d in raw.aggregate(pipeline)] == [doc], pipeline
    # A reshaping stage reads the first occurrence, as the matcher does.
    assert list(client.dup.ag.aggregate([{"$addFields": {"b": "$a"}}]))[0]["b"] == 1
