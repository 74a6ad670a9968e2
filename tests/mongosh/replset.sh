#!/usr/bin/env bash
# mongosh against `shale serve --replSet rs0` (issue 24 item 4): rs.initiate(), rs.status(),
# rs.conf(), then a write through a replicaSet= connection string, then change streams
# (issue 24 item 7) through mongosh's watch() and through the Node driver mongosh brings
# (`node_watch`: the `mongodb` package itself, no shell in between). Installs mongosh as
# smoke.sh does (tests/mongosh/.prefix, or SHALE_MONGOSH_PREFIX), starts the server on a free
# loopback port with a temporary data directory, prints PASS or FAIL per step and exits
# non-zero when any fails. SHALE_BIN picks the binary (default target/debug/shale).
set -euo pipefail
cd "$(dirname "$0")/../.."

MONGOSH_VERSION=2.12.0
PREFIX=${SHALE_MONGOSH_PREFIX:-$PWD/tests/mongosh/.prefix}
SHALE_BIN=${SHALE_BIN:-$PWD/target/debug/shale}
MONGOSH=$PREFIX/node_modules/.bin/mongosh
SET=rs0

# step name, connection string kind (direct or set), JavaScript that throws unless it worked.
step_js() {
    case "$1" in
    not_yet) echo 'const h = db.hello();
        if (h.isWritablePrimary !== false || h.isreplicaset !== true) throw new Error(EJSON.stringify(h));
        let code = 0; try { rs.status(); } catch (e) { code = e.code; }
        if (code !== 94) throw new Error("rs.status() before initiate: " + code);
        print("uninitiated: not writable, rs.status() NotYetInitialized");' ;;
    initiate) echo 'const r = rs.initiate();
        if (r.ok !== 1) throw new Error(EJSON.stringify(r));
        const h = db.hello();
        if (!h.isWritablePrimary || h.setName !== "rs0") throw new Error(EJSON.stringify(h));
        print("initiated; primary " + h.primary);' ;;
    status) echo 'const s = rs.status();
        if (s.set !== "rs0" || s.members.length !== 1 || s.members[0].stateStr !== "PRIMARY")
            throw new Error(EJSON.stringify(s));
        print("rs.status(): " + s.members[0].name + " " + s.members[0].stateStr);' ;;
    conf) echo 'const c = rs.conf();
        if (c._id !== "rs0" || c.members.length !== 1) throw new Error(EJSON.stringify(c));
        print("rs.conf(): version " + c.version + ", member " + c.members[0].host);' ;;
    set_write) echo 'const r = db.items.insertOne({_id: 1, via: "replicaSet"});
        if (!r.acknowledged) throw new Error(EJSON.stringify(r));
        const d = db.items.findOne({_id: 1});
        if (d.via !== "replicaSet") throw new Error(EJSON.stringify(d));
        print("wrote and read through replicaSet=rs0");' ;;
    watch) echo 'const cs = db.watched.watch([], {fullDocument: "updateLookup"});
        db.watched.insertOne({_id: 1, w: 1});
        db.watched.updateOne({_id: 1}, {$set: {w: 2}});
        const next = (c) => { for (let i = 0; i < 100; i++) { const e = c.tryNext(); if (e) return e; sleep(50); } return null; };
        const a = next(cs), b = next(cs);
        if (!a || a.operationType !== "insert" || a.fullDocument.w !== 1) throw new Error("first: " + EJSON.stringify(a));
        if (!b || b.operationType !== "update" || b.fullDocument.w !== 2) throw new Error("second: " + EJSON.stringify(b));
        const resumed = db.watched.watch([], {resumeAfter: a._id});
        const c = next(resumed);
        if (!c || c.operationType !== "update" || c.updateDescription.updatedFields.w !== 2) throw new Error("resumed: " + EJSON.stringify(c));
        print("watch(): insert, update with updateLookup, resumeAfter");' ;;
    node_watch) echo 'const { MongoClient } = require(process.env.NODE_DRIVER);
        (async () => {
            const client = new MongoClient(process.env.URI);
            try {
                const coll = client.db("smoke").collection("node_watched");
                const cs = coll.watch();
                await cs.tryNext();
                await coll.insertOne({ _id: 7, via: "node" });
                await coll.deleteOne({ _id: 7 });
                const a = await cs.next(), b = await cs.next();
                if (a.operationType !== "insert" || a.fullDocument.via !== "node") throw new Error(JSON.stringify(a));
                if (b.operationType !== "delete" || b.documentKey._id !== 7) throw new Error(JSON.stringify(b));
                await cs.close();
                console.log("Node driver watch(): insert and delete events");
            } finally { await client.close(); }
        })().catch((e) => { console.error(String(e)); process.exit(1); });' ;;
    *) echo "unknown step: $1" >&2; return 1 ;;
    esac
}
STEPS=(not_yet initiate status conf set_write watch node_watch)

[ -x "$SHALE_BIN" ] || { echo "shale binary not found at $SHALE_BIN; build it or set SHALE_BIN" >&2; exit 1; }
if ! [ -x "$MONGOSH" ] || [ "$("$MONGOSH" --version 2>/dev/null)" != "$MONGOSH_VERSION" ]; then
    echo "installing mongosh $MONGOSH_VERSION into $PREFIX"
    npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error "mongosh@$MONGOSH_VERSION"
fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
tmp=$(mktemp -d)
"$SHALE_BIN" serve --dbpath "$tmp/data" --port "$port" --replSet "$SET" >"$tmp/shale.log" 2>&1 &
pid=$!
cleanup() {
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT
for _ in $(seq 1 300); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
    kill -0 "$pid" 2>/dev/null || { cat "$tmp/shale.log" >&2; echo "shale exited" >&2; exit 1; }
    sleep 0.1
done

direct="mongodb://127.0.0.1:$port/smoke?directConnection=true&serverSelectionTimeoutMS=5000"
set_uri="mongodb://127.0.0.1:$port/smoke?replicaSet=$SET&serverSelectionTimeoutMS=5000"
failed=0
for s in "${STEPS[@]}"; do
    uri=$direct
    [ "$s" = set_write ] || [ "$s" = node_watch ] && uri=$set_uri
    if [ "$s" = node_watch ]; then
        run() { URI=$uri NODE_DRIVER=$PREFIX/node_modules/mongodb timeout 60 node -e "$(step_js "$s")"; }
    else
        run() { DO_NOT_TRACK=1 "$MONGOSH" --quiet --norc "$uri" --eval "$(step_js "$s")"; }
    fi
    if out=$(run 2>&1); then
        echo "PASS $s: $(echo "$out" | grep -v '^\s*$' | tail -1)"
    else
        echo "FAIL $s: $(echo "$out" | grep -v '^\s*$' | tail -1)"
        failed=$((failed + 1))
    fi
done
echo "mongosh replSet: $(( ${#STEPS[@]} - failed )) passed, $failed failed"
[ "$failed" -eq 0 ]
