"""TTL indexes expire documents (mongod's TTL monitor): with ttlMonitorSleepSecs=1 a pass
runs every second and deletes the documents whose indexed date is older than
expireAfterSeconds (an array's earliest date counts), leaving fresh dates, non-dates and
documents without the field; serverStatus.metrics.ttl counts passes and deletes; the
parameters read back, and ttlMonitorEnabled=false stops expiry at run time."""

import datetime
import time

from conftest import Server


def wait_for(predicate, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_expired_documents_go_and_the_rest_stay(tmp_path):
    (tmp_path / "data").mkdir()
    server = Server(tmp_path / "data", args=["--setParameter", "ttlMonitorSleepSecs=1"])
    try:
        client = server.client()
        coll = client.ttl.sessions
        coll.create_index("at", expireAfterSeconds=60)
        now = datetime.datetime.now(datetime.timezone.utc)
        old, fresh = now - datetime.timedelta(minutes=5), now
        coll.insert_many(
            [
                {"_id": 1, "at": old},
                {"_id": 2, "at": fresh},
                {"_id": 3, "at": "not a date"},
                {"_id": 4},
                {"_id": 5, "at": [fresh, old]},
            ]
        )
        assert wait_for(lambda: coll.count_documents({}) == 3), list(coll.find())
        assert sorted(d["_id"] for d in coll.find()) == [2, 3, 4]
        ttl = client.admin.command("serverStatus")["metrics"]["ttl"]
        assert ttl["deletedDocuments"] >= 2 and ttl["passes"] >= 1
        params = client.admin.command("getParameter", 1, ttlMonitorSleepSecs=1, ttlMonitorEnabled=1)
        assert (params["ttlMonitorSleepSecs"], params["ttlMonitorEnabled"]) == (1, True)
        assert client.ttl.command("validate", "sessions")["valid"] is True

        client.admin.command("setParameter", 1, ttlMonitorEnabled=False)
        time.sleep(1.5)  # a pass that started before the switch has ended
        coll.insert_one({"_id": 6, "at": old})
        time.sleep(2.5)
        assert coll.count_documents({"_id": 6}) == 1, "expired with the monitor off"
        client.admin.command("setParameter", 1, ttlMonitorEnabled=True)
        assert wait_for(lambda: coll.count_documents({"_id": 6}) == 0)
        client.close()
    finally:
        server.stop()
