#!/usr/bin/env bash
# mongosh smoke test against the real `shale` binary: installs mongosh from the npm registry
# into tests/mongosh/.prefix if it is missing (or SHALE_MONGOSH_PREFIX), starts the server on
# a free loopback port with a temporary data directory, and runs one `mongosh --eval` per
# step, printing PASS or FAIL for each. Exits non-zero when any selected step fails. The
# server runs with --tlsMode preferTLS and certificates the script makes with the openssl
# CLI, so the plain steps and the TLS ones (tls, x509) share it.
#
#   bash tests/mongosh/smoke.sh                 # every step
#   bash tests/mongosh/smoke.sh connect insert     # only these steps
#
# SHALE_BIN picks the binary (default target/debug/shale, as scripts/test.sh builds it).
set -euo pipefail
cd "$(dirname "$0")/../.."

MONGOSH_VERSION=2.12.0
PREFIX=${SHALE_MONGOSH_PREFIX:-$PWD/tests/mongosh/.prefix}
SHALE_BIN=${SHALE_BIN:-$PWD/target/debug/shale}
MONGOSH=$PREFIX/node_modules/.bin/mongosh

ALL_STEPS=(connect insert show_dbs find count stats current_op profiling fsync_lock create_user login tls create_x509_user x509)
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=("${ALL_STEPS[@]}")

# The JavaScript of each step; it throws (so mongosh exits non-zero) unless the step worked.
# `show dbs` is a shell command, not JavaScript: its output is checked by step_expect.
step_js() {
    case "$1" in
    connect) echo 'const r = db.runCommand({ping: 1});
        if (r.ok !== 1) throw new Error("ping: " + EJSON.stringify(r));
        const h = db.hello();
        if (!h.isWritablePrimary || h.maxWireVersion !== 21) throw new Error(EJSON.stringify(h));
        print("connected to " + db.version());' ;;
    show_dbs) echo 'show dbs' ;;
    insert) echo 'const r = db.items.insertOne({_id: 1, name: "shale", n: 42});
        if (!r.acknowledged || r.insertedId !== 1) throw new Error(EJSON.stringify(r));
        print("inserted " + r.insertedId);' ;;
    find) echo 'const docs = db.items.find({n: 42}).toArray();
        if (docs.length !== 1 || docs[0].name !== "shale") throw new Error(EJSON.stringify(docs));
        print("found " + EJSON.stringify(docs[0]));' ;;
    count) echo 'const n = db.items.countDocuments({});
        if (n !== 1) throw new Error("countDocuments: " + n);
        print("counted " + n);' ;;
    stats) echo 'const s = db.items.stats();
        if (s.ok !== 1 || s.count !== 1 || s.nindexes !== 1) throw new Error(EJSON.stringify(s));
        const t = db.items.totalSize();
        if (!(t > 0)) throw new Error("totalSize: " + t);
        print("stats: count " + s.count + ", total size " + t);' ;;
    current_op) echo 'const ops = db.currentOp().inprog;
        if (ops.length < 1 || !ops.some(o => o.active && o.op === "command")) throw new Error(EJSON.stringify(ops));
        const k = db.killOp(2000000000);
        if (k.ok !== 1 || k.info !== "attempting to kill op") throw new Error(EJSON.stringify(k));
        print("currentOp: " + ops.length + " operation(s), opid " + ops[0].opid);' ;;
    profiling) echo 'const was = db.setProfilingLevel(2, {slowms: 50});
        if (was.ok !== 1 || was.was !== 0) throw new Error(EJSON.stringify(was));
        db.items.findOne({_id: 1});
        const p = db.getProfilingStatus();
        if (p.was !== 2 || p.slowms !== 50) throw new Error(EJSON.stringify(p));
        db.setProfilingLevel(0, {slowms: 100});
        const e = db.system.profile.findOne({op: "query", ns: "smoke.items"});
        if (!e || e.nreturned !== db.items.countDocuments({_id: 1})) throw new Error(EJSON.stringify(e));
        print("profiling: level " + p.was + ", slowms " + p.slowms + ", entry millis " + e.millis);' ;;
    fsync_lock) echo 'const l = db.fsyncLock();
        if (l.ok !== 1 || Number(l.lockCount) !== 1) throw new Error(EJSON.stringify(l));
        if (db.adminCommand({currentOp: 1}).fsyncLock !== true) throw new Error("currentOp does not say fsyncLock");
        const u = db.fsyncUnlock();
        if (u.ok !== 1 || Number(u.lockCount) !== 0) throw new Error(EJSON.stringify(u));
        db.items.insertOne({_id: 2});
        print("fsyncLock/fsyncUnlock: lockCount " + l.lockCount + " then " + u.lockCount);' ;;
    create_user) echo 'const r = db.getSiblingDB("admin").createUser({user: "smoke", pwd: "smokepw", roles: ["root"]});
        if (r.ok !== 1) throw new Error(EJSON.stringify(r));
        print("created user smoke");' ;;
    login) echo 'const s = db.runCommand({connectionStatus: 1}).authInfo;
        if (s.authenticatedUsers.length !== 1 || s.authenticatedUsers[0].user !== "smoke")
            throw new Error(EJSON.stringify(s));
        print("logged in as " + s.authenticatedUsers[0].user);' ;;
    tls) echo 'const r = db.runCommand({ping: 1});
        if (r.ok !== 1) throw new Error("ping: " + EJSON.stringify(r));
        print("ping over TLS: ok");' ;;
    create_x509_user) echo 'const r = db.getSiblingDB("$external").createUser({user: "CN=smoke,O=Shale", roles: [{role: "read", db: "smoke"}]});
        if (r.ok !== 1) throw new Error(EJSON.stringify(r));
        print("created user CN=smoke,O=Shale");' ;;
    x509) echo 'const s = db.runCommand({connectionStatus: 1}).authInfo;
        if (s.authenticatedUsers.length !== 1 || s.authenticatedUsers[0].user !== "CN=smoke,O=Shale")
            throw new Error(EJSON.stringify(s));
        print("logged in with X.509 as " + s.authenticatedUsers[0].user);' ;;
    *) echo "unknown step: $1" >&2; return 1 ;;
    esac
}

# The connection string of a step: `login` carries the user `create_user` made; `tls` and
# `x509` connect with TLS, `x509` with the client certificate.
step_uri() {
    local tls="tls=true&tlsCAFile=$tmp/ca.pem"
    case "$1" in
    login) echo "mongodb://smoke:smokepw@127.0.0.1:$port/smoke?directConnection=true&serverSelectionTimeoutMS=5000&authSource=admin" ;;
    tls) echo "$uri&$tls" ;;
    x509) echo "$uri&$tls&tlsCertificateKeyFile=$tmp/client.pem&authMechanism=MONGODB-X509" ;;
    *) echo "$uri" ;;
    esac
}

# A line the step's output must contain (empty: none).
step_expect() {
    case "$1" in
    show_dbs) echo 'smoke' ;;
    *) echo '' ;;
    esac
}

for s in "${steps[@]}"; do step_js "$s" >/dev/null; done

[ -x "$SHALE_BIN" ] || { echo "shale binary not found at $SHALE_BIN; build it or set SHALE_BIN" >&2; exit 1; }
if ! [ -x "$MONGOSH" ] || [ "$("$MONGOSH" --version 2>/dev/null)" != "$MONGOSH_VERSION" ]; then
    echo "installing mongosh $MONGOSH_VERSION into $PREFIX"
    npm install --prefix "$PREFIX" --no-audit --no-fund --loglevel=error "mongosh@$MONGOSH_VERSION"
fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
tmp=$(mktemp -d)
# A CA, a server certificate for 127.0.0.1 and a client certificate (subject CN=smoke,O=Shale).
certs() {
    local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
    openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 2 -subj /CN=smoke-ca \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign
    local name subject ext
    for name in server client; do
        if [ "$name" = server ]; then
            subject=/CN=localhost
            ext=$'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth'
        else
            subject=/O=Shale/CN=smoke
            ext=extendedKeyUsage=clientAuth
        fi
        openssl req "${ec[@]}" -keyout "$name.key" -out "$name.csr" -subj "$subject"
        printf '%s\n' "$ext" >"$name.ext"
        openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial \
            -out "$name.crt" -days 2 -extfile "$name.ext"
        cat "$name.crt" "$name.key" >"$name.pem"
    done
}
(cd "$tmp" && certs) >"$tmp/openssl.log" 2>&1 || { cat "$tmp/openssl.log" >&2; echo "openssl failed" >&2; exit 1; }
"$SHALE_BIN" serve --dbpath "$tmp/data" --port "$port" --tlsMode preferTLS \
    --tlsCertificateKeyFile "$tmp/server.pem" --tlsCAFile "$tmp/ca.pem" \
    --tlsAllowConnectionsWithoutCertificates >"$tmp/shale.log" 2>&1 &
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

uri="mongodb://127.0.0.1:$port/smoke?directConnection=true&serverSelectionTimeoutMS=5000"
failed=0
for s in "${steps[@]}"; do
    expect=$(step_expect "$s")
    if out=$(DO_NOT_TRACK=1 "$MONGOSH" --quiet --norc "$(step_uri "$s")" --eval "$(step_js "$s")" 2>&1) &&
        { [ -z "$expect" ] || grep -q "$expect" <<<"$out"; }; then
        echo "PASS $s: $(echo "$out" | grep -v '^\s*$' | tail -1)"
    else
        echo "FAIL $s: $(echo "$out" | grep -v '^\s*$' | tail -1)"
        failed=$((failed + 1))
    fi
done
passed=$(( ${#steps[@]} - failed ))
echo "mongosh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
