"""Hot index builds (issue 23 item 9): createIndexes over a populated collection no longer
stops other work for the whole scan. While it runs, writes to the same collection and
reads and writes on another database go on — no operation waits more than half the
build, where the old server-wide lock held each of them for all of it — and the finished
index is exact: validate agrees, and a query hinted onto it returns what a collection scan
returns. collStats lists a build in progress under indexBuilds."""

import subprocess
import sys
import time

from pymongo import MongoClient

DOCS = 60_000
VALUES = 50


def test_work_goes_on_during_a_build_and_the_index_is_exact(server):
    url = f"mongodb://127.0.0.1:{server.port}"
    worker = MongoClient(url)
    coll = worker.hot.docs
    batch = [{"_id": i, "a": i % VALUES, "pad": "x" * 60} for i in range(DOCS)]
    for start in range(0, DOCS, 5000):
        coll.insert_many(batch[start : start + 5000])

    # The build runs in a process of its own, so nothing in this one (the GIL, the
    # driver's pool) can stall the worker's operations on the build's behalf.
    builder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pymongo import MongoClient\n"
            "c = MongoClient(sys.argv[1]); t = time.monotonic()\n"
            "c.hot.docs.create_index('a', name='a_1')\n"
            "print(time.monotonic() - t)",
            url,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    seen_in_progress = []
    other = worker.elsewhere.things
    longest, slowest, n = 0.0, None, 0
    while builder.poll() is None:
        i = DOCS + n
        for what, op in [
            ("insert", lambda: coll.insert_one({"_id": i, "a": n % VALUES})),
            ("update", lambda: coll.update_one({"_id": n * 7 % DOCS}, {"$set": {"a": (n * 3) % VALUES}})),
            ("delete", lambda: coll.delete_one({"_id": n * 11 % DOCS + 1})),
            ("insert elsewhere", lambda: other.insert_one({"_id": n})),
            ("find elsewhere", lambda: other.find_one({"_id": n})),
        ]:
            t = time.monotonic()
            op()
            took = time.monotonic() - t
            if took > longest:
                longest, slowest = took, f"{what} in round {n}"
        n += 1
        if n % 20 == 0:
            builds = worker.hot.command("collStats", "docs").get("indexBuilds", [])
            seen_in_progress.extend(builds)
    out, _ = builder.communicate()
    assert builder.returncode == 0
    seconds = float(out.strip())
    assert seconds > 0.3, f"a build of {seconds:.2f} s is too short to tell hot from blocking"
    assert longest < seconds / 2, f"{slowest} waited {longest:.2f} s of a {seconds:.2f} s build"
    assert n >= 10, f"only {n} rounds ran during the build"
    assert "a_1" in seen_in_progress

    assert worker.hot.command("collStats", "docs")["indexBuilds"] == []
    assert worker.hot.command("validate", "docs")["valid"] is True
    assert "a_1" in coll.index_information()
    plan = coll.find({"a": 3}).explain()["queryPlanner"]["winningPlan"]
    assert "IXSCAN" in str(plan), plan
    for a in range(VALUES):
        hinted = sorted(d["_id"] for d in coll.find({"a": a}).hint("a_1"))
        scanned = sorted(d["_id"] for d in coll.find({"a": a}).hint({"$natural": 1}))
        assert hinted == scanned, f"a = {a}"
    worker.close()
