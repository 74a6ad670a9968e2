#!/usr/bin/env bash
# mongosh against `shale serve --replSet rs0` (issue 24 item 4): rs.initiate(), rs.status(),
# rs.conf(), then a write through a replicaSet= connection string. Installs mongosh as
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
    *) echo "unknown step: $1" >&2; return 1 ;;
    esac
}
STEPS=(not_yet initiate status conf set_write)

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
    [ "$s" = set_write ] && uri=$set_uri
    if out=$(DO_NOT_TRACK=1 "$MONGOSH" --quiet --norc "$uri" --eval "$(step_js "$s")" 2>&1); then
        echo "PASS $s: $(echo "$out" | grep -v '^\s*$' | tail -1)"
    else
        echo "FAIL $s: $(echo "$out" | grep -v '^\s*$' | tail -1)"
        failed=$((failed + 1))
    fi
done
echo "mongosh replSet: $(( ${#STEPS[@]} - failed )) passed, $failed failed"
[ "$failed" -eq 0 ]
