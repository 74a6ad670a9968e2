"""Start-up failures and salvage (issue 29, items 4 and 6; docs/operations.md).

Each file kind of a stopped data directory is damaged as an operator might find it — a
record in the middle of the log, the catalog, both headers of a tree file, one block of a
tree, a tree file cut short — and then:
- `shale serve` refuses to start with exit status 1 and exactly one error line naming the
  file and the next step, and no backtrace;
- `shale verify` reports the damage (exit status 2);
- `shale serve --repair` salvages what is intact, reports what it dropped, and exits 0;
- the server then starts, `validate` passes, the documents that survive are exactly those
  the damage spared, and the secondary index agrees with them.
A data directory that is a file, is locked, or is not writable, and a port in use, also give
one line and exit status 1.
"""

import os
import socket
import subprocess
from pathlib import Path

from pymongo import InsertOne
from pymongo.write_concern import WriteConcern

from conftest import Server, docs_tree, first_block, free_port, shale_binary

DOCS = 3000
PAD = "x" * 200


def populate(dbpath: Path, crash: bool = False) -> None:
    """Inserts DOCS documents with an index on `a`; with `crash`, 200 more acknowledged by
    the journal one by one and then SIGKILL (so the log holds them), else a clean stop."""
    srv = Server(dbpath)
    try:
        with srv.client() as c:
            coll = c.t.c
            coll.create_index("a")
            for start in range(0, DOCS, 500):
                coll.bulk_write(
                    [
                        InsertOne({"_id": i, "a": i % 97, "pad": PAD})
                        for i in range(start, start + 500)
                    ]
                )
            if crash:
                j = coll.with_options(write_concern=WriteConcern(j=True))
                for i in range(DOCS, DOCS + 200):
                    j.insert_one({"_id": i, "a": i % 97, "pad": "y"})
    finally:
        srv.stop(9 if crash else 15)


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [shale_binary(), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "RUST_BACKTRACE": "1"},
    )


def start_fails(dbpath: Path) -> str:
    """Starts a server that must refuse; returns its one error line."""
    p = run("serve", "--dbpath", str(dbpath), "--port", str(free_port()))
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    errors = [l for l in out.splitlines() if "ERROR" in l or "shale: cannot start" in l]
    assert len(errors) == 1, out
    assert "panicked" not in out and "backtrace" not in out.lower(), out
    return errors[0]


def verify(dbpath: Path) -> str:
    p = run("verify", "--dbpath", str(dbpath))
    assert p.returncode == 2, p.stdout + p.stderr
    assert "verdict: DAMAGED" in p.stdout, p.stdout
    return p.stdout


def repair(dbpath: Path) -> str:
    p = run("serve", "--repair", "--dbpath", str(dbpath), "--port", str(free_port()))
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "verdict: repaired; every collection validates" in out, out
    clean = run("verify", "--dbpath", str(dbpath))
    assert clean.returncode == 0, clean.stdout + clean.stderr
    return out


def surviving_ids(dbpath: Path) -> list[int]:
    """Starts the repaired server; checks validate and the index; returns the `_id`s."""
    srv = Server(dbpath)
    try:
        with srv.client() as c:
            coll = c.t.c
            result = c.t.command("validate", "c")
            assert result["valid"], result
            ids = sorted(d["_id"] for d in coll.find({}, {"_id": 1}))
            for a in (0, 5, 96):
                by_index = coll.count_documents({"a": a}, hint="a_1")
                assert by_index == sum(1 for i in ids if i % 97 == a)
            return ids
    finally:
        srv.stop()


def flip(path: Path, offset: int, mask: int = 0x10) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ mask]))


def test_a_damaged_record_in_the_middle_of_the_log(tmp_path):
    dbpath = tmp_path / "data"
    populate(dbpath, crash=True)
    [log] = (dbpath / "wal").glob("log-*.wal")
    size = log.stat().st_size
    flip(log, 4096 + (size - 4096) // 2, 0xFF)
    line = start_fails(dbpath)
    assert log.name in line and "offset" in line and "shale verify --dbpath" in line, line
    assert "--repair" in line, line
    report = verify(dbpath)
    assert "DAMAGED at offset" in report and "readable records after it" in report, report
    out = repair(dbpath)
    assert "log: kept" in out and "readable records after it" in out, out
    ids = surviving_ids(dbpath)
    # Commits are whole records: what survives is every insert before the damage.
    assert 0 < len(ids) < DOCS + 200
    assert ids == list(range(len(ids)))


def test_a_damaged_catalog(tmp_path):
    dbpath = tmp_path / "data"
    populate(dbpath)
    flip(dbpath / "CATALOG", 30, 0x01)
    line = start_fails(dbpath)
    assert "CATALOG" in line and "shale verify --dbpath" in line, line
    assert "catalog" in verify(dbpath)
    out = repair(dbpath)
    assert "catalog: read entry by entry" in out and "CATALOG.damaged" in out, out
    assert surviving_ids(dbpath) == list(range(DOCS))


def test_both_headers_of_a_tree_file(tmp_path):
    dbpath = tmp_path / "data"
    populate(dbpath)
    tree = docs_tree(dbpath)
    flip(tree, 30)
    flip(tree, 4096 + 30)
    line = start_fails(dbpath)
    assert tree.name in line and "header" in line, line
    report = verify(dbpath)
    assert "header slot 0" in report and "header slot 1" in report, report
    out = repair(dbpath)
    assert f"{tree.name}: rebuilt" in out and "0 blocks dropped" in out, out
    assert surviving_ids(dbpath) == list(range(DOCS))


def test_a_damaged_block_of_a_tree(tmp_path):
    dbpath = tmp_path / "data"
    populate(dbpath)
    tree = docs_tree(dbpath)
    flip(tree, first_block(tree) + 12000, 0xFF)
    # The server starts: a damaged block fails only the queries that read it.
    report = verify(dbpath)
    assert "basement" in report and "checksum mismatch" in report, report
    out = repair(dbpath)
    assert "dropped block" in out and "keys 0x" in out, out
    ids = surviving_ids(dbpath)
    assert 0 < len(ids) < DOCS
    # One basement holds a run of neighbouring keys: that run, and only it, is gone.
    gone = sorted(set(range(DOCS)) - set(ids))
    assert gone == list(range(gone[0], gone[-1] + 1)), gone


def test_a_damaged_index_is_rebuilt_whole(tmp_path):
    dbpath = tmp_path / "data"
    populate(dbpath)
    trees = sorted(dbpath.glob("tree-*.shl"), key=lambda p: p.stat().st_size)
    index = trees[-2]  # the index on `a`: second largest after the documents
    flip(index, first_block(index) + 6000, 0xFF)
    report = verify(dbpath)
    assert index.name in report and "DAMAGED" in report, report
    out = repair(dbpath)
    assert "index a_1 rebuilt from the documents" in out, out
    # The documents were intact: the rebuilt index holds an entry for every one.
    assert surviving_ids(dbpath) == list(range(DOCS))


def test_a_tree_file_cut_short(tmp_path):
    dbpath = tmp_path / "data"
    populate(dbpath)
    tree = docs_tree(dbpath)
    os.truncate(tree, tree.stat().st_size // 2)
    line = start_fails(dbpath)
    assert tree.name in line, line
    report = verify(dbpath)
    assert tree.name in report and "DAMAGED" in report, report
    out = repair(dbpath)
    assert f"{tree.name}: rebuilt" in out and "dropped" in out, out
    ids = surviving_ids(dbpath)
    assert 0 < len(ids) < DOCS


def test_a_data_directory_that_is_a_file(tmp_path):
    path = tmp_path / "data"
    path.write_text("not a directory")
    line = start_fails(path)
    assert "is not a directory" in line and "--dbpath" in line, line


def test_a_locked_data_directory(tmp_path):
    dbpath = tmp_path / "data"
    srv = Server(dbpath)
    try:
        line = start_fails(dbpath)
        assert "locked by another process" in line and "stop it" in line, line
        p = run("verify", "--dbpath", str(dbpath))
        assert p.returncode == 1 and "a server is running" in p.stderr, p.stderr
        p = run("serve", "--repair", "--dbpath", str(dbpath), "--port", str(free_port()))
        assert p.returncode == 1 and "a server is running" in p.stdout + p.stderr
    finally:
        srv.stop()


def test_a_data_directory_that_is_not_writable(tmp_path):
    if os.geteuid() == 0:
        # Permissions do not stop root; a directory of /proc does.
        dbpath = Path("/proc/1")
    else:
        dbpath = tmp_path / "data"
        dbpath.mkdir()
        dbpath.chmod(0o555)
    try:
        line = start_fails(dbpath)
        assert "not writable" in line and "--dbpath" in line, line
    finally:
        if dbpath != Path("/proc/1"):
            dbpath.chmod(0o755)


def test_verify_says_clean_after_a_clean_stop(tmp_path):
    dbpath = tmp_path / "data"
    populate(dbpath)
    p = run("verify", "--dbpath", str(dbpath))
    assert p.returncode == 0, p.stdout
    assert "verdict: clean" in p.stdout and "c1" in p.stdout


def test_a_port_in_use(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = run("serve", "--dbpath", str(tmp_path / "data"), "--port", str(port))
    out = p.stdout + p.stderr
    assert p.returncode == 1, out
    errors = [l for l in out.splitlines() if "ERROR" in l]
    assert len(errors) == 1 and "Address already in use" in errors[0], out
    assert "--port" in errors[0], out
