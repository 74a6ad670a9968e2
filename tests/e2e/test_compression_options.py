"""Compression and page sizes per collection and per index (issue 23 item 7): TokuMX's
`compression`/`pageSize`/`readPageSize` on `create` and on index specs, `compressionLevel`
for zstd, the `storageEngine.shale` forms, their refusals with mongod's codes, the options
listed back, and `collStats.shale`'s per-tree raw and stored bytes."""

import pytest
from pymongo.errors import OperationFailure

from conftest import Server

BAD_VALUE = 2
TYPE_MISMATCH = 14
INVALID_OPTIONS = 72
INVALID_INDEX_SPECIFICATION_OPTION = 197


def compressible(i: int) -> dict:
    return {
        "_id": i,
        "name": f"customer {i % 500}",
        "city": ["Springfield", "Shelbyville", "Ogdenville"][i % 3],
        "notes": "the quick brown fox jumps over the lazy dog " * 4,
        "n": i % 97,
    }


def test_options_round_trip_through_list_collections_and_list_indexes(db):
    db.command({"create": "z", "compression": "zstd", "compressionLevel": 9, "pageSize": "1MB", "readPageSize": 8192})
    db.command({"create": "plain", "compression": "none"})
    db.command({"create": "se", "storageEngine": {"shale": {"compression": "lz4", "readPageSizeBytes": 4096}}})
    db.command({"create": "toku", "compression": "quicklz", "pageSize": 4194304, "readPageSize": "64KB"})
    options = {c["name"]: c["options"] for c in db.list_collections()}
    assert options["z"] == {"compression": "zstd", "compressionLevel": 9, "pageSize": "1MB", "readPageSize": 8192}
    assert options["plain"] == {"compression": "none"}
    assert options["se"] == {"storageEngine": {"shale": {"compression": "lz4", "readPageSizeBytes": 4096}}}
    assert options["toku"]["compression"] == "quicklz"

    db.z.create_index("a", compression="lz4", readPageSize=4096, name="a_lz4")
    db.z.create_index("b", compression="zstd", compressionLevel=1, pageSize=262144)
    db.z.create_index("c", storageEngine={"shale": {"compression": "none"}})
    specs = {s["name"]: s for s in db.z.list_indexes()}
    assert specs["a_lz4"]["compression"] == "lz4" and specs["a_lz4"]["readPageSize"] == 4096
    assert specs["b_1"]["compressionLevel"] == 1 and specs["b_1"]["pageSize"] == 262144
    assert specs["c_1"]["storageEngine"] == {"shale": {"compression": "none"}}

    trees = db.command("collStats", "z")["shale"]["trees"]
    assert trees["_id_"]["compression"] == "zstd" and trees["_id_"]["compressionLevel"] == 9
    assert trees["_id_"]["pageSize"] == 1 << 20 and trees["_id_"]["readPageSize"] == 8192
    assert trees["a_lz4"]["compression"] == "lz4" and "compressionLevel" not in trees["a_lz4"]
    assert trees["a_lz4"]["readPageSize"] == 4096
    assert trees["b_1"]["compressionLevel"] == 1 and trees["b_1"]["pageSize"] == 262144
    assert trees["c_1"]["compression"] == "none"
    toku = db.command("collStats", "toku")["shale"]["trees"]["_id_"]
    assert (toku["compression"], toku["pageSize"], toku["readPageSize"]) == ("lz4", 4 << 20, 64 << 10)


def test_a_clustering_index_takes_the_collection_layout_unless_its_spec_says(db):
    db.command({"create": "cl", "compression": "zstd", "compressionLevel": 7, "readPageSize": 32768})
    db.cl.create_index("a", clustering=True)
    db.cl.create_index("b", clustering=True, compression="lz4")
    db.cl.create_index("c")
    trees = db.command("collStats", "cl")["shale"]["trees"]
    assert (trees["a_1"]["compressionLevel"], trees["a_1"]["readPageSize"]) == (7, 32768)
    assert (trees["b_1"]["compression"], trees["b_1"]["readPageSize"]) == ("lz4", 32768)
    assert trees["c_1"]["compressionLevel"] == 1, "a plain index takes the defaults (zstd level 1)"


@pytest.mark.parametrize(
    "options, code",
    [
        ({"compression": "snappy"}, BAD_VALUE),
        ({"compression": 3}, TYPE_MISMATCH),
        ({"compressionLevel": 0}, BAD_VALUE),
        ({"compressionLevel": 23}, BAD_VALUE),
        ({"compressionLevel": "high"}, TYPE_MISMATCH),
        ({"compression": "lz4", "compressionLevel": 5}, BAD_VALUE),
        ({"pageSize": 100}, BAD_VALUE),
        ({"pageSize": "4 furlongs"}, BAD_VALUE),
        ({"pageSize": 65536, "readPageSize": 131072}, BAD_VALUE),
        ({"readPageSize": [1]}, TYPE_MISMATCH),
        ({"storageEngine": {"shale": {"blockSize": 4096}}}, INVALID_OPTIONS),
        ({"storageEngine": {"shale": {"compression": "brotli"}}}, BAD_VALUE),
        ({"compression": "lz4", "storageEngine": {"shale": {"compression": "zstd"}}}, INVALID_OPTIONS),
    ],
)
def test_bad_layout_options_are_refused_with_mongod_codes(db, options, code):
    with pytest.raises(OperationFailure) as e:
        db.command({"create": "bad", **options})
    assert e.value.code == code, e.value.details
    assert "bad" not in db.list_collection_names(), "nothing is created"
    db.command({"create": "good"})
    with pytest.raises(OperationFailure) as e:
        db.good.create_index("a", **options)
    assert e.value.code == code, e.value.details
    assert [s["name"] for s in db.good.list_indexes()] == ["_id_"]


def test_unknown_index_options_stay_refused(db):
    with pytest.raises(OperationFailure) as e:
        db.x.create_index("a", blockCompressor="zstd")
    assert e.value.code == INVALID_INDEX_SPECIFICATION_OPTION


def test_coll_stats_figures_and_data_survive_a_restart(tmp_path):
    server = Server(tmp_path / "data")
    try:
        db = server.client().comp
        for name, codec in [("z", "zstd"), ("n", "none"), ("l", "lz4")]:
            db.command({"create": name, "compression": codec, "pageSize": 262144})
            db[name].insert_many([compressible(i) for i in range(3000)])
            db[name].create_index("city", compression=codec)
    finally:
        assert server.stop() == 0
    # A clean close writes every node (a checkpoint), so the figures count every document.
    server = Server(tmp_path / "data")
    try:
        db = server.client().comp
        stats = {name: db.command("collStats", name) for name in "znl"}
        for name, s in stats.items():
            docs = s["shale"]["trees"]["_id_"]
            assert docs["nodes"] >= 1 and docs["bytesRaw"] >= s["size"], (name, docs)
            total = s["shale"]
            assert total["bytesRaw"] == sum(t["bytesRaw"] for t in total["trees"].values())
            assert total["fileBytes"] >= total["bytesStored"] >= 1, (name, total)
        none = stats["n"]["shale"]
        assert none["bytesRaw"] == none["bytesStored"] and none["compressionRatio"] == 1.0
        zstd = stats["z"]["shale"]
        assert zstd["bytesStored"] * 3 < zstd["bytesRaw"], zstd
        assert zstd["trees"]["_id_"]["compressionRatio"] > stats["l"]["shale"]["trees"]["_id_"]["compressionRatio"] > 1.0
        scaled = db.command("collStats", "z", scale=1024)["shale"]
        assert scaled["bytesStored"] == zstd["bytesStored"] // 1024
        for name in "znl":
            assert db[name].count_documents({}) == 3000
            assert db[name].find_one({"_id": 1234}) == compressible(1234)
            assert db[name].count_documents({"city": "Shelbyville"}) == 1000
        assert db.z.options()["compression"] == "zstd"
        assert db.command("validate", "z")["valid"]
    finally:
        server.stop()
