"""listIndexes lists an index whose hot build is still running, as mongod 7.0 lists every
index in its catalog: as a plain spec, wrapped as `{spec}` under `includeIndexBuildInfo`,
and plain under `includeBuildUUIDs` (a standalone's builds are single-phase, with no build
UUID, so mongod adds neither `buildUUID` nor `indexBuildInfo`). The build is held open by
its size, as in test_hot_index_build.py; collStats' indexBuilds, read after each listing,
proves the build was still running when the listing saw it."""

import subprocess
import sys

from pymongo import MongoClient

DOCS = 60_000


def test_an_index_being_built_is_listed(server):
    url = f"mongodb://127.0.0.1:{server.port}"
    client = MongoClient(url)
    db = client.hot
    batch = [{"_id": i, "a": i % 50, "pad": "x" * 60} for i in range(DOCS)]
    for start in range(0, DOCS, 5000):
        db.docs.insert_many(batch[start : start + 5000])
    builder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from pymongo import MongoClient\n"
         "MongoClient(sys.argv[1]).hot.docs.create_index('a', name='a_1')", url],
    )
    seen = {}
    while builder.poll() is None and len(seen) < 3:
        for form in ("plain", "includeIndexBuildInfo", "includeBuildUUIDs"):
            args = {} if form == "plain" else {form: True}
            listed = db.command("listIndexes", "docs", **args)["cursor"]["firstBatch"]
            building = db.command("collStats", "docs").get("indexBuilds", [])
            if "a_1" in building and len(listed) == 2:
                seen[form] = listed[1]
    assert builder.wait() == 0
    assert set(seen) == {"plain", "includeIndexBuildInfo", "includeBuildUUIDs"}, seen
    spec = {"v": 2, "key": {"a": 1}, "name": "a_1"}
    assert seen["plain"] == spec
    assert seen["includeBuildUUIDs"] == spec
    assert seen["includeIndexBuildInfo"] == {"spec": spec}
    # Ready now: listed the same way.
    assert db.command("listIndexes", "docs")["cursor"]["firstBatch"][1] == spec
    client.close()
