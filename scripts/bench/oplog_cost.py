#!/usr/bin/env python3
"""Server CPU per inserted document (from /proc/PID/stat) on a standalone and on a
`--replSet` member, which also writes each document's oplog entry: 40 insert_many of 1,000
documents and 3,000 insert_one, 3 alternating rounds. A stopgap check of the oplog's cost
(docs/bench/history/2026-11-26-oplog-cost-per-insert.md), not a shale-bench workload:
usage `oplog_cost.py SHALE_BIN`."""
import subprocess, time, sys, os, shutil
from pymongo import MongoClient
BIN=sys.argv[1]
def cpu(pid):
    f=open(f"/proc/{pid}/stat").read().rsplit(")",1)[1].split()
    return (int(f[11])+int(f[12]))/os.sysconf("SC_CLK_TCK")
def run(rs, port):
    d=f"/tmp/oc{port}"; shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
    args=[BIN,"serve","--dbpath",d,"--port",str(port)]+(["--replSet","rs0"] if rs else [])
    p=subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    c=MongoClient(port=port, directConnection=True)
    if rs: c.admin.command("replSetInitiate"); time.sleep(1)
    coll=c.t.c
    docs=lambda k:[{"_id":k*1000+i,"a":i,"s":"x"*100} for i in range(1000)]
    coll.insert_many(docs(999))
    c0=cpu(p.pid)
    for k in range(40): coll.insert_many(docs(k))
    many=(cpu(p.pid)-c0)*1e6/40000
    c0=cpu(p.pid)
    for i in range(3000): coll.insert_one({"_id":"o%d"%i,"a":i,"s":"x"*100})
    one=(cpu(p.pid)-c0)*1e6/3000
    p.terminate(); p.wait()
    return many, one
for r in range(3):
    for rs in (False, True):
        m,o=run(rs, 47200+r*2+rs)
        print(("replSet " if rs else "standalone"), f"insert_many {m:.1f} us/doc  insert_one {o:.1f} us/doc", flush=True)
