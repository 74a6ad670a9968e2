"""`shale serve --replSet NAME`: a one-member replica set (issue 24 item 4). Before
`replSetInitiate` the member is not writable; after it, it is the set's primary, drivers
discover it as a replica set, and a restart comes back as the same set's primary."""

import time

import pytest
from bson import ObjectId, Timestamp
from pymongo import MongoClient, WriteConcern
from pymongo.errors import NotPrimaryError, OperationFailure, WriteConcernError
from pymongo.read_concern import ReadConcern

from conftest import Server

SET = "rs0"


def start(tmp_path, port=None, name=SET):
    return Server(tmp_path / "data", port=port, args=["--replSet", name])


def code_of(fn):
    with pytest.raises(OperationFailure) as e:
        fn()
    return e.value.code


@pytest.fixture
def member(tmp_path):
    srv = start(tmp_path)
    yield srv
    srv.stop()


@pytest.fixture
def primary(member):
    with member.client() as c:
        c.admin.command("replSetInitiate")
    return member


def test_a_standalone_has_no_replication(client):
    for cmd in ["replSetGetStatus", "replSetGetConfig", "replSetInitiate"]:
        assert code_of(lambda: client.admin.command(cmd)) == 76
    hello = client.admin.command("hello")
    assert hello["isWritablePrimary"] is True and "setName" not in hello
    assert "$clusterTime" not in hello


def test_before_initiate_the_member_takes_no_writes(member):
    with member.client(retryWrites=False) as c:
        hello = c.admin.command("hello")
        assert hello["isWritablePrimary"] is False and hello["secondary"] is False
        assert hello["isreplicaset"] is True
        assert hello["info"] == "Does not have a valid replica set config"
        assert isinstance(hello["topologyVersion"]["processId"], ObjectId)
        assert c.admin.command("isMaster")["ismaster"] is False
        with pytest.raises(NotPrimaryError) as e:
            c.app.items.insert_one({"_id": 1})
        assert (e.value.details["code"], e.value.details["codeName"]) == (
            10107,
            "NotWritablePrimary",
        )
        # The error names the topology, so the driver keeps the server (SDAM: stale error).
        assert e.value.details["topologyVersion"] == hello["topologyVersion"]
        assert code_of(lambda: c.admin.command("replSetGetStatus")) == 94
        assert code_of(lambda: c.admin.command("replSetGetConfig")) == 94
        c.local.scratch.insert_one({"_id": 1})  # `local` is always writable, as on mongod


def test_initiate_makes_this_server_the_primary(member):
    with member.client() as c:
        assert code_of(lambda: c.app.command("replSetInitiate")) == 13  # admin only
        reply = c.admin.command("replSetInitiate", {})
        assert reply["ok"] == 1
        me = f"127.0.0.1:{member.port}"
        hello = c.admin.command("hello")
        assert hello["setName"] == SET and hello["hosts"] == [me]
        assert hello["primary"] == me and hello["me"] == me
        assert hello["isWritablePrimary"] is True and hello["secondary"] is False
        assert hello["setVersion"] == 1
        assert isinstance(hello["electionId"], ObjectId)
        assert hello["topologyVersion"]["counter"] >= 1
        last = hello["lastWrite"]
        assert isinstance(last["opTime"]["ts"], Timestamp) and last["opTime"]["t"] == 1
        assert last["majorityOpTime"] == last["opTime"]
        assert isinstance(hello["$clusterTime"]["clusterTime"], Timestamp)
        assert isinstance(hello["operationTime"], Timestamp)
        assert c.admin.command("isMaster")["ismaster"] is True

        status = c.admin.command("replSetGetStatus")
        assert status["set"] == SET and status["myState"] == 1
        [m] = status["members"]
        assert (m["name"], m["stateStr"], m["health"], m["self"]) == (me, "PRIMARY", 1, True)
        assert m["optime"]["t"] == 1
        config = c.admin.command("replSetGetConfig")["config"]
        assert config["_id"] == SET and config["version"] == 1
        assert [x["host"] for x in config["members"]] == [me]
        assert isinstance(config["settings"]["replicaSetId"], ObjectId)

        assert code_of(lambda: c.admin.command("replSetInitiate")) == 23
        c.app.items.insert_one({"_id": 1})
        assert c.app.items.find_one() == {"_id": 1}


def test_initiate_checks_the_config(member):
    with member.client() as c:
        me = f"localhost:{member.port}"
        bad = [
            ({"_id": "other", "members": [{"_id": 0, "host": me}]}, 93),
            ({"_id": SET, "members": []}, 93),
            ({"_id": SET, "members": [{"_id": 0, "host": "192.0.2.1:27017"}]}, 74),
            (
                {
                    "_id": SET,
                    "members": [{"_id": 0, "host": me}, {"_id": 1, "host": "192.0.2.1:27017"}],
                },
                74,
            ),
            ({"_id": SET, "members": [{"_id": 0, "host": me, "arbiterOnly": True}]}, 93),
        ]
        for config, code in bad:
            assert code_of(lambda: c.admin.command("replSetInitiate", config)) == code, config
        c.admin.command("replSetInitiate", {"_id": SET, "members": [{"_id": 5, "host": me}]})
        hello = c.admin.command("hello")
        assert hello["me"] == me and hello["hosts"] == [me]


def test_reconfig_of_the_one_member(primary):
    with primary.client() as c:
        config = c.admin.command("replSetGetConfig")["config"]
        config["version"] = 1
        assert code_of(lambda: c.admin.command("replSetReconfig", config)) == 103
        config["version"] = 2
        config["members"][0]["tags"] = {"dc": "east"}
        c.admin.command("replSetReconfig", config)
        assert c.admin.command("hello")["setVersion"] == 2
        got = c.admin.command("replSetGetConfig")["config"]
        assert got["members"][0]["tags"] == {"dc": "east"}
        config["version"] = 3
        config["members"].append({"_id": 1, "host": "192.0.2.1:27017"})
        assert code_of(lambda: c.admin.command("replSetReconfig", config)) == 74


def test_pymongo_discovers_the_set_and_runs_a_transaction(primary):
    uri = f"mongodb://127.0.0.1:{primary.port}/?replicaSet={SET}"
    with MongoClient(uri, serverSelectionTimeoutMS=10000) as c:
        items = c.app.items
        items.insert_one({"_id": 1, "n": 1})
        assert c.topology_description.topology_type_name == "ReplicaSetWithPrimary"
        assert c.primary == ("127.0.0.1", primary.port)

        def body(s):
            items.insert_one({"_id": 2}, session=s)
            items.update_one({"_id": 1}, {"$inc": {"n": 1}}, session=s)

        with c.start_session() as s:
            s.with_transaction(body)
            # A causally consistent read in the session sends afterClusterTime.
            assert items.find_one({"_id": 1}, session=s)["n"] == 2
        assert items.count_documents({}) == 2
        with pytest.raises(RuntimeError):
            with c.start_session() as s:
                def fails(s):
                    items.insert_one({"_id": 3}, session=s)
                    raise RuntimeError("midway")
                s.with_transaction(fails)
        assert items.find_one({"_id": 3}) is None
    with primary.client() as direct:  # directConnection=true still works
        assert direct.app.items.count_documents({}) == 2


def test_write_concern_on_one_member(primary):
    with primary.client() as c:
        items = c.app.items
        items.with_options(write_concern=WriteConcern(w="majority")).insert_one({"_id": 1})
        items.with_options(write_concern=WriteConcern(w=1)).insert_one({"_id": 2})
        with pytest.raises(WriteConcernError) as e:
            items.with_options(write_concern=WriteConcern(w=2)).insert_one({"_id": 3})
        assert e.value.code == 100
        assert e.value.details["codeName"] == "UnsatisfiableWriteConcern"
        assert items.find_one({"_id": 3}) == {"_id": 3}, "the write itself is applied"
        with pytest.raises(WriteConcernError) as e:
            items.with_options(write_concern=WriteConcern(w="dc1")).insert_one({"_id": 4})
        assert e.value.code == 79


def test_read_concerns_on_the_primary(primary):
    with primary.client() as c:
        c.app.items.insert_one({"_id": 1})
        for level in ["local", "majority", "linearizable", "available"]:
            coll = c.app.items.with_options(read_concern=ReadConcern(level))
            assert coll.find_one({"_id": 1}) == {"_id": 1}, level
            assert coll.count_documents({}) == 1, level
        # Snapshot reads outside transactions (test_snapshot_reads.py): find, aggregate and
        # distinct read at a cluster time; another command refuses the level.
        snapshot = c.app.items.with_options(read_concern=ReadConcern("snapshot"))
        assert snapshot.find_one({"_id": 1}) == {"_id": 1}
        with c.start_session(snapshot=True) as s:
            assert c.app.items.find_one({}, session=s) == {"_id": 1}
        rc = {"level": "snapshot"}
        assert code_of(lambda: c.app.command("count", "items", readConcern=rc)) == 72
        linearizable = {"level": "linearizable"}
        assert code_of(lambda: c.app.command("insert", "items", documents=[{}], readConcern=linearizable)) == 72
        out = [{"$match": {}}, {"$out": "copy"}]
        assert code_of(lambda: c.app.command("aggregate", "items", pipeline=out, cursor={}, readConcern=linearizable)) == 72
        # In a transaction, snapshot is the transaction's own read concern.
        with c.start_session() as s, s.start_transaction(read_concern=ReadConcern("snapshot")):
            assert c.app.items.find_one({"_id": 1}, session=s) == {"_id": 1}


def test_operation_and_cluster_times_advance(primary):
    with primary.client() as c:
        times = []
        for i in range(3):
            reply = c.app.command("insert", "items", documents=[{"_id": i}])
            times.append(reply["operationTime"])
            assert reply["$clusterTime"]["clusterTime"] >= reply["operationTime"]
            sig = reply["$clusterTime"]["signature"]
            assert sig["keyId"] == 0 and bytes(sig["hash"]) == bytes(20)
        assert times == sorted(times) and len(set(times)) == 3
        read = c.app.command("find", "items")
        assert read["operationTime"] == times[-1]
        # A client's $clusterTime (pymongo sends its session's when newer) moves the clock.
        later = Timestamp(times[-1].time + 100, 1)
        with c.start_session() as s:
            s.advance_cluster_time({"clusterTime": later, "signature": sig})
            c.app.command("ping", session=s)
        assert c.app.command("ping")["$clusterTime"]["clusterTime"] >= later
        too_far = Timestamp(times[-1].time + 400 * 24 * 3600, 1)
        with primary.client() as fresh, fresh.start_session() as s:
            s.advance_cluster_time({"clusterTime": too_far, "signature": sig})
            assert code_of(lambda: fresh.app.command("ping", session=s)) == 205


def test_monitors_wait_on_awaitable_hello(primary):
    """Drivers stream hellos once the server sends topologyVersion: the server must hold
    each one for maxAwaitTimeMS, or the driver's monitor spins."""
    uri = f"mongodb://127.0.0.1:{primary.port}/?replicaSet={SET}&heartbeatFrequencyMS=500"
    with MongoClient(uri, serverSelectionTimeoutMS=10000) as c:
        c.admin.command("ping")
        before = c.admin.command("serverStatus")["opcounters"]["command"]
        time.sleep(2)
        after = c.admin.command("serverStatus")["opcounters"]["command"]
        assert after - before < 30, f"{after - before} commands in 2 s: the monitor spins"


def test_a_restart_comes_back_as_the_same_sets_primary(tmp_path):
    srv = start(tmp_path)
    port = srv.port
    with srv.client() as c:
        c.admin.command("replSetInitiate")
        first = c.admin.command("hello")
        c.app.items.insert_one({"_id": 1})
    srv.stop()
    srv = start(tmp_path, port=port)
    try:
        with srv.client() as c:
            hello = c.admin.command("hello")
            assert hello["isWritablePrimary"] is True and hello["setName"] == SET
            assert hello["hosts"] == first["hosts"]
            assert hello["electionId"] > first["electionId"], "a new term after the restart"
            assert hello["lastWrite"]["opTime"]["t"] == 2
            assert c.app.items.find_one() == {"_id": 1}
            config = c.admin.command("replSetGetConfig")["config"]
            assert config["term"] == 2
            c.app.items.insert_one({"_id": 2})
    finally:
        srv.stop()


def test_a_restart_on_another_port_is_not_a_member(tmp_path):
    srv = start(tmp_path)
    with srv.client() as c:
        c.admin.command("replSetInitiate")
    srv.stop()
    srv = start(tmp_path)  # a new free port: the stored config does not name this server
    try:
        with srv.client(retryWrites=False) as c:
            hello = c.admin.command("hello")
            assert hello["isWritablePrimary"] is False and hello["isreplicaset"] is True
            assert code_of(lambda: c.admin.command("replSetGetStatus")) == 93
            with pytest.raises(NotPrimaryError) as e:
                c.app.items.insert_one({"_id": 1})
            assert e.value.details["code"] == 10107
            config = c.admin.command("replSetGetConfig")["config"]
            config["members"][0]["host"] = f"127.0.0.1:{srv.port}"
            c.admin.command("replSetReconfig", config, force=True)
            assert c.admin.command("hello")["isWritablePrimary"] is True
            c.app.items.insert_one({"_id": 1})
    finally:
        srv.stop()


def test_the_config_file_names_the_set(tmp_path):
    port = None
    conf = tmp_path / "shale.conf"
    data = tmp_path / "data"
    from conftest import free_port

    port = free_port()
    conf.write_text(
        f"storage:\n  dbPath: {data}\nnet:\n  port: {port}\nreplication:\n  replSetName: fromfile\n"
    )
    srv = Server(data, port=port, args=["--config", str(conf)], defaults=False)
    try:
        with srv.client() as c:
            c.admin.command("replSetInitiate")
            assert c.admin.command("hello")["setName"] == "fromfile"
            opts = c.admin.command("getCmdLineOpts")["parsed"]
            assert opts["replication"] == {"replSetName": "fromfile"}
    finally:
        srv.stop()
