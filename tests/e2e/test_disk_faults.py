"""Faults of the disk under a running server (issue 29 item 4; docs/operations.md, Disk full).

Disk full: the data directory lives on a small file system of its own (a 64 MiB ext4 image
mounted through a loop device, else a 64 MiB tmpfs; the test is skipped where neither can
be mounted, i.e. not as root). Journaled inserts of 2,500 documents each (three engine
transactions) go on until the device is full, then:
- the failing insert answers as mongod does: `ok: 1`, `n` the documents it inserted, and a
  write error `OutOfDiskSpace` (14031) naming the file and offset at the first document
  that did not go in, where the ordered insert stopped; an unordered insert after it has a
  write error for each of its documents, and so do the writes after it;
- no document of the failed transaction is visible to any reader, though the trees had
  applied it before its log write failed (M3 and M2's cap in docs/recovery.md);
- the server stays up and answers reads;
- once the space is freed, the next operation reopens the engine in place (its log cut back
  to the durable end, its trees at their checkpoints, the log redone: docs/recovery.md,
  Reopening in place), cursors from before are killed, and writes succeed without a
  restart; every acknowledged insert is there, nothing of the failed batch is, and
  `validate` passes, then and after a restart.

A flipped byte in a tree file after a clean shutdown: the server starts, the queries that
read the damaged block fail with `DataCorruptionDetected` (301) naming the file and the
block, and no query returns wrong data."""

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from pymongo import InsertOne
from pymongo.errors import BulkWriteError, OperationFailure
from pymongo.write_concern import WriteConcern

from conftest import Server, docs_tree, first_block

SIZE_MB = 64
BALLAST_MB = 12


def mount_small_fs(where: Path) -> str:
    """Mounts a SIZE_MB file system at `where`; returns its kind, or skips the test."""
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root")
    image = where.parent / "fs.img"
    with open(image, "wb") as f:
        f.truncate(SIZE_MB << 20)
    steps = [
        (["mkfs.ext4", "-q", "-F", str(image)], ["mount", "-o", "loop", str(image), str(where)]),
        (None, ["mount", "-t", "tmpfs", "-o", f"size={SIZE_MB}m", "tmpfs", str(where)]),
    ]
    def ok(cmd: list[str]) -> bool:
        # A machine without mkfs.ext4 or mount falls through to the next way, or skips.
        try:
            return subprocess.run(cmd, capture_output=True).returncode == 0
        except OSError:
            return False

    for mkfs, mount in steps:
        if mkfs and not ok(mkfs):
            continue
        if ok(mount):
            image.unlink()
            return "ext4 on a loop device" if mkfs else "tmpfs"
    image.unlink()
    pytest.skip("neither a loop device nor tmpfs could be mounted")


def assert_out_of_space(e: Exception) -> str:
    """The error is mongod's OutOfDiskSpace and says which file; returns its message."""
    if isinstance(e, BulkWriteError):
        # A write error (an entry of `writeErrors`) carries no codeName, as on mongod.
        [err] = e.details["writeErrors"]
        code, name, msg = err["code"], err.get("codeName", "OutOfDiskSpace"), err["errmsg"]
    else:
        assert isinstance(e, OperationFailure), e
        code, name, msg = e.code, e.details.get("codeName", "OutOfDiskSpace"), str(e)
    assert (code, name) == (14031, "OutOfDiskSpace"), (code, name, msg)
    assert "os error 28" in msg, msg
    return msg


def test_disk_full_fails_writes_cleanly_and_loses_nothing_acknowledged(tmp_path):
    mnt = tmp_path / "mnt"
    mount_small_fs(mnt)
    server = None
    try:
        dbpath = mnt / "data"
        dbpath.mkdir()
        ballast = mnt / "ballast"
        ballast.write_bytes(b"\0" * (BALLAST_MB << 20))
        os.sync()
        server = Server(dbpath, args=["--wiredTigerCacheSizeGB", "0.25"])
        client = server.client()
        coll = client.t.get_collection("c", write_concern=WriteConcern(j=True))
        coll.create_index("a")
        acked, failed, i, per_batch = [], None, 0, 2500
        pad = os.urandom(1000).hex()  # incompressible
        while failed is None and i < 200_000:
            batch = [{"_id": i + k, "a": (i + k) % 97, "pad": pad} for k in range(per_batch)]
            try:
                coll.bulk_write([InsertOne(d) for d in batch])
                acked.extend(d["_id"] for d in batch)
            except BulkWriteError as e:
                # ok: 1 with n and the write error, never a command error.
                done = e.details["nInserted"]
                acked.extend(d["_id"] for d in batch[:done])
                failed = (e, [d["_id"] for d in batch[done:]])
            i += per_batch
        assert failed is not None, "the device never filled"
        first_msg = assert_out_of_space(failed[0])
        assert str(mnt) in first_msg and "offset" in first_msg, first_msg
        [write_error] = failed[0].details["writeErrors"]
        assert write_error["index"] == failed[0].details["nInserted"], failed[0].details
        assert failed[0].details["nInserted"] % 1000 == 0, "transactions of 1,000 documents"

        # Reads go on, and see exactly what was acknowledged: nothing of the failed batch.
        assert client.admin.command("ping")["ok"] == 1
        ids = sorted(d["_id"] for d in coll.find({}, {"_id": 1}))
        failed_ids = failed[1]
        assert ids == acked, (len(ids), len(acked), sorted(set(ids) ^ set(acked))[:10])
        assert coll.count_documents({"_id": {"$in": failed_ids}}) == 0
        assert coll.count_documents({"a": 5}, hint="a_1") == sum(1 for x in acked if x % 97 == 5)
        assert coll.estimated_document_count() == len(acked), "the fast count forgot the failed commit"

        # Later writes are refused with the same code while the environment is failed: an
        # unordered insert has a write error for each document, the messages within 1 MiB.
        with pytest.raises(BulkWriteError) as later:
            coll.insert_many([{"_id": f"later-{k}"} for k in range(per_batch)], ordered=False)
        details = later.value.details
        assert details["nInserted"] == 0, details["nInserted"]
        errors = details["writeErrors"]
        assert [e["index"] for e in errors] == list(range(per_batch))
        assert {e["code"] for e in errors} == {14031}
        assert "os error 28" in errors[0]["errmsg"] and "os error 28" in errors[-1]["errmsg"]
        with pytest.raises(OperationFailure) as later_one:
            coll.insert_one({"_id": "later"})
        assert_out_of_space(later_one.value)
        assert coll.find_one({"_id": "later"}) is None
        assert coll.count_documents({"_id": {"$regex": "^later"}}) == 0

        # A cursor opened before the space comes back is killed by the reopen.
        cursor = coll.find({}, batch_size=2)
        next(cursor)

        # Free the space: the server reopens its log and trees in place (recovery's
        # procedure, docs/recovery.md) and takes writes again, without a restart.
        ballast.unlink()
        deadline = time.monotonic() + 10
        while True:
            try:
                coll.insert_one({"_id": "after", "a": 1})
                break
            except OperationFailure as e:
                assert_out_of_space(e)
                assert time.monotonic() < deadline, "writes did not resume"
                time.sleep(0.2)
        assert server.proc.poll() is None
        assert "reopened in place" in server.read_log()
        acked.append("after")
        with pytest.raises(OperationFailure) as killed:
            list(cursor)
        assert killed.value.code == 43, killed.value  # CursorNotFound
        ids = sorted((d["_id"] for d in coll.find({}, {"_id": 1})), key=str)
        assert ids == sorted(acked, key=str), (len(ids), len(acked))
        assert coll.count_documents({"_id": {"$in": failed_ids}}) == 0
        assert client.t.command("validate", "c")["valid"] is True
        coll.bulk_write([InsertOne({"_id": f"more-{k}", "a": k}) for k in range(100)])
        acked.extend(f"more-{k}" for k in range(100))
        client.close()

        # And a restart agrees: everything acknowledged, nothing of the failed batch.
        server.stop()
        server = Server(dbpath, args=["--wiredTigerCacheSizeGB", "0.25"])
        with server.client() as c:
            coll = c.t.c
            ids = sorted((d["_id"] for d in coll.find({}, {"_id": 1})), key=str)
            assert ids == sorted(acked, key=str), (len(ids), len(acked))
            assert c.t.command("validate", "c")["valid"] is True
            by_index = coll.count_documents({"a": {"$gte": 0}}, hint="a_1")
            assert by_index == len(acked)
    finally:
        if server is not None:
            server.stop(9)
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill_up(path: Path) -> None:
    """Writes `path` until the file system is full (the last write fails with ENOSPC)."""
    chunk = os.urandom(1 << 20)
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass
        try:
            while True:
                f.write(chunk[:4096])
        except OSError:
            pass
    os.sync()


def test_ddl_that_failed_on_a_full_disk_is_not_there_after_the_reopen(tmp_path):
    """A `create` and a `createIndexes` whose own writes find the device full fail with
    `OutOfDiskSpace`; once space is freed and the engine reopened in place, the server
    agrees with its durable catalog: neither exists, both can be made again, and what is
    written to them then survives a restart (issue 29, reopen edge cases)."""
    mnt = tmp_path / "mnt"
    mount_small_fs(mnt)
    server = None
    try:
        dbpath = mnt / "data"
        dbpath.mkdir()
        server = Server(dbpath, args=["--wiredTigerCacheSizeGB", "0.25"])
        client = server.client()
        coll = client.t.get_collection("c", write_concern=WriteConcern(j=True))
        coll.insert_many([{"_id": i, "a": i} for i in range(100)])
        ballast = mnt / "ballast"
        fill_up(ballast)

        failures = {}
        for what, attempt in [
            ("made", lambda: client.t.create_collection("made")),
            ("a_1", lambda: coll.create_index("a", name="a_1")),
        ]:
            try:
                attempt()
            except OperationFailure as e:
                failures[what] = e
        assert failures, "some DDL failed on the full device"
        for e in failures.values():
            assert_out_of_space(e)

        ballast.unlink()
        deadline = time.monotonic() + 10
        while True:
            try:
                coll.insert_one({"_id": "after"})
                break
            except OperationFailure as e:
                assert_out_of_space(e)
                assert time.monotonic() < deadline, "writes did not resume"
                time.sleep(0.2)
        # (A tree file that could not be written fails only its DDL; a catalog write that
        # failed fails the engine, reopened in place by that insert.)

        # A DDL that failed left nothing the server shows.
        names = client.t.list_collection_names()
        indexes = [ix["name"] for ix in coll.list_indexes()]
        assert "made" not in failures or "made" not in names, names
        assert "a_1" not in failures or "a_1" not in indexes, indexes
        # What the reopened server says exists is what a restart will find.
        client.t.get_collection("made").insert_one({"_id": 1, "kept": True})
        coll.create_index("a", name="a_1")
        assert coll.count_documents({"a": 5}, hint="a_1") == 1
        client.close()
        server.stop()
        server = Server(dbpath, args=["--wiredTigerCacheSizeGB", "0.25"])
        with server.client() as c:
            assert "made" in c.t.list_collection_names(), names
            assert c.t.made.find_one({"_id": 1}) == {"_id": 1, "kept": True}, names
            assert "a_1" in [ix["name"] for ix in c.t.c.list_indexes()], indexes
            assert c.t.c.count_documents({"a": 5}, hint="a_1") == 1
            assert c.t.c.count_documents({}) == 101
            assert c.t.command("validate", "c")["valid"] is True
            assert c.t.command("validate", "made")["valid"] is True
    finally:
        if server is not None:
            server.stop(9)
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_an_index_build_in_flight_when_the_disk_fills_is_whole_or_absent(tmp_path):
    """A hot index build running when the device fills fails (or, had it finished, stands);
    once space is freed and the engine reopened in place, the index is either there with
    an entry for every document or not there at all, and a restart agrees."""
    mnt = tmp_path / "mnt"
    mount_small_fs(mnt)
    server = None
    try:
        dbpath = mnt / "data"
        dbpath.mkdir()
        args = ["--wiredTigerCacheSizeGB", "0.25"]
        server = Server(dbpath, args=args)
        client = server.client()
        coll = client.t.get_collection("c", write_concern=WriteConcern(j=True))
        pad = os.urandom(300).hex()
        n = 20_000
        for start in range(0, n, 2000):
            coll.insert_many([{"_id": i, "a": i % 1000, "pad": pad} for i in range(start, start + 2000)])
        ballast = mnt / "ballast"
        build = {}

        def run_build():
            try:
                build["name"] = coll.create_index([("a", 1), ("pad", 1)], name="a_pad")
            except OperationFailure as e:
                build["error"] = e

        thread = threading.Thread(target=run_build)
        thread.start()
        fill_up(ballast)
        thread.join(timeout=300)
        assert not thread.is_alive(), "the index build never ended"
        if "error" in build:
            assert_out_of_space(build["error"])

        ballast.unlink()
        deadline = time.monotonic() + 10
        while True:
            try:
                coll.insert_one({"_id": "after", "a": 1, "pad": "p"})
                break
            except OperationFailure as e:
                assert_out_of_space(e)
                assert time.monotonic() < deadline, "writes did not resume"
                time.sleep(0.2)

        def check(c) -> bool:
            """The index is whole or absent; returns whether it is there."""
            names = [ix["name"] for ix in c.t.c.list_indexes()]
            assert c.t.c.count_documents({}) == n + 1
            if "a_pad" in names:
                by_index = c.t.c.count_documents({"a": {"$gte": 0}}, hint="a_pad")
                assert by_index == n + 1, by_index
            assert c.t.command("validate", "c")["valid"] is True
            return "a_pad" in names

        there = check(client)
        # A build that succeeded left its index; one whose createIndexes failed did not
        # (B6 in crates/db/src/index_build.rs), though the device filled mid-build.
        assert there == ("error" not in build), build
        if "error" in build and "reopened in place" in server.read_log():
            assert "whose build failed on the full device was removed" in server.read_log()
        client.close()
        server.stop()
        server = Server(dbpath, args=args)
        with server.client() as c:
            assert check(c) == there
    finally:
        if server is not None:
            server.stop(9)
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_flipped_byte_in_a_tree_fails_only_the_queries_that_read_it(tmp_path):
    dbpath = tmp_path / "data"
    server = Server(dbpath)
    n = 3000
    with server.client() as c:
        c.t.c.insert_many([{"_id": i, "v": i * 7, "pad": "x" * 200} for i in range(n)])
    server.stop()
    tree = docs_tree(dbpath)
    at = first_block(tree) + 12000
    with open(tree, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0xFF]))

    server = Server(dbpath)
    try:
        with server.client() as c:
            with pytest.raises(OperationFailure) as scan:
                list(c.t.c.find({}))
            e = scan.value
            assert (e.code, e.details.get("codeName")) == (301, "DataCorruptionDetected"), e
            assert tree.name in str(e) and "block" in str(e), str(e)
            damaged = 0
            for i in range(n):
                try:
                    d = c.t.c.find_one({"_id": i})
                except OperationFailure as e:
                    assert e.code == 301 and tree.name in str(e), str(e)
                    damaged += 1
                    continue
                assert d == {"_id": i, "v": i * 7, "pad": "x" * 200}, d
            # One basement is damaged: some documents fail, the rest read right.
            assert 0 < damaged < n
            assert c.admin.command("ping")["ok"] == 1
    finally:
        server.stop()
