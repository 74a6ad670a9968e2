#!/usr/bin/env bash
# Runs every ShaleDB check: formatting, lints, Rust unit and integration tests, and the
# end-to-end suite with the real pymongo driver against the real `shale` binary, and the
# drivers' CRUD spec tests (against a standalone and a one-member --replSet) and pymongo's
# test_auth.py against a server with --auth (all from the pymongo source package) with
# pass-count floors, the mongosh smoke tests (standalone and --replSet), and
# short cargo-fuzz runs of the wire decoder, the BSON readers and the engine's decoders.
# Needs rustup (rust-toolchain.toml), a C toolchain (cc, make), Python 3.11+ with venv,
# Node.js with npm, openssl, and the crates.io, PyPI and npm registries on the first run:
# the README's Prerequisites section, which also lists what this installs and where.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's wall time, printed as a table when the script ends (pass or fail), so a slow
# CI run shows where its minutes went (issue 28, item 8).
timings=()
step_name=""
step_start=$SECONDS
end_step() {
    if [ -n "$step_name" ]; then
        timings+=("$(printf '%6ds  %s' $((SECONDS - step_start)) "$step_name")")
    fi
}
step() {
    end_step
    step_name="$*"
    step_start=$SECONDS
    printf '\n==> %s\n' "$*"
}
print_timings() {
    local status=$?
    stop_background_builds
    end_step
    step_name=""
    printf '\n==> step times (total %ds, exit %d)\n' "$SECONDS" "$status"
    printf '%s\n' "${timings[@]}" | cut -c1-110
}
trap print_timings EXIT

# Runs each named function in a background process of its own with its output in a file
# of its own, waits for all, prints each one's output under its name, and fails if any
# failed. For steps that mostly wait (fsyncs, servers started and killed): side by side
# they take about the time of the longest.
# Stops the background builds if they still run (the script is ending early).
stop_background_builds() {
    if [ -n "${background_pid:-}" ] && kill -0 "$background_pid" 2>/dev/null; then
        kill -- -"$background_pid" 2>/dev/null || true
    fi
}

# Waits for the background builds, prints their output, and fails if they failed.
wait_background_builds() {
    local status=0
    wait "$background_pid" || status=$?
    background_pid=""
    cat "$background_log"
    rm -f "$background_log"
    if [ "$status" -ne 0 ]; then
        echo "background builds failed (exit $status)" >&2
        return 1
    fi
}

side_by_side() {
    local jobs=("$@") pids=() logs=() statuses=() failed=0 i job
    for job in "${jobs[@]}"; do
        logs+=("$(mktemp)")
        "$job" >"${logs[-1]}" 2>&1 &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        statuses[i]=0
        wait "${pids[i]}" || statuses[i]=$?
    done
    for i in "${!pids[@]}"; do
        echo "---- ${jobs[i]} (exit ${statuses[i]})"
        cat "${logs[i]}"
        rm -f "${logs[i]}"
        [ "${statuses[i]}" -eq 0 ] || failed=1
    done
    return "$failed"
}

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test: build every test target"
cargo test --workspace --locked --no-run
# The debug `shale` binary that build made (the cli crate's integration test needs it) is the
# one the bench's wire_quick test and the end-to-end suites drive: no `cargo build -p
# shale-cli`, which resolves the dependencies' features for the cli alone and compiled the
# server stack a second time.
export SHALE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/shale"
if [ ! -x "$SHALE_BIN" ]; then
    echo "the test build made no $SHALE_BIN" >&2
    exit 1
fi

# The tests wait on fsyncs and processes more than they compute (the engine's model and
# bit-flip suites: 143 s of wall time for 72 s of CPU), so they run in three processes side
# by side: the engine's two longest suites, the engine's other integration tests (every file
# under crates/engine/tests/ but those two, found here, so a new file is never left out),
# and the rest: every crate's unit tests, the other crates' integration tests, the doctests.
# Each names its targets with --workspace, never -p: `-p shale-engine` resolves the
# dependencies' features for the engine alone, which rebuilt syn, proptest, the engine and
# all 34 of its test binaries a second time (minutes on a fresh machine).
engine_longest=(model_random_ops fault_bit_flips)
# Test-target arguments (--test NAME) for the files under a tests/ directory, less `skip`.
test_targets() {
    local skip=" $1 " f name
    shift
    for f in "$@"; do
        name=$(basename "$f" .rs)
        [[ "$skip" == *" $name "* ]] || printf -- '--test\n%s\n' "$name"
    done
}
cargo_test_engine_longest() {
    local name args=()
    for name in "${engine_longest[@]}"; do
        args+=(--test "$name")
    done
    cargo test --workspace --locked "${args[@]}"
}
cargo_test_engine_others() {
    local args
    mapfile -t args < <(test_targets "${engine_longest[*]}" crates/engine/tests/*.rs)
    cargo test --workspace --locked "${args[@]}"
}
cargo_test_rest_of_workspace() {
    local args f others=()
    for f in crates/*/tests/*.rs; do
        [[ "$f" == crates/engine/* ]] || others+=("$f")
    done
    mapfile -t args < <(test_targets "" "${others[@]}")
    cargo test --workspace --locked --lib --bins "${args[@]}" &&
        cargo test --workspace --locked --doc
}
step "cargo test: three processes side by side (the engine's two longest suites, the engine's others, the rest of the workspace)"
side_by_side cargo_test_engine_longest cargo_test_engine_others cargo_test_rest_of_workspace


# What the last step needs compiles in the background, niced, while the wire suites below
# mostly wait on their servers (fresh, the fuzz build alone took 274 s on this 2-core
# machine): the fuzz targets (into fuzz/target), then with CHECK_BENCH_PEERS=1 (.ci/run)
# the benchmark runner with its RocksDB and SQLite peers (checked, not run: issue 22 item
# 9). Its own process group, so a failing run stops it; the fuzz step waits for it.
background_builds() {
    bash scripts/fuzz.sh --build-only || return 1
    if [ "${CHECK_BENCH_PEERS:-0}" = 1 ]; then
        echo "== cargo check -p shale-bench --all-features (the RocksDB and SQLite peers)"
        ROCKSDB_LIB_DIR="${ROCKSDB_LIB_DIR:-/usr/lib/x86_64-linux-gnu}" \
            cargo check --locked -p shale-bench --all-features
    fi
}
export -f background_builds
background_log=$(mktemp)
setsid nice -n 10 bash -c background_builds >"$background_log" 2>&1 &
background_pid=$!
echo "background builds started (pid $background_pid, log $background_log)"

step "mongosh smoke test (installs mongosh from npm into tests/mongosh/.prefix on first use)"
bash tests/mongosh/smoke.sh

step "mongosh against shale serve --replSet: rs.initiate(), rs.status(), rs.conf()"
bash tests/mongosh/replset.sh

step "python virtualenv for the end-to-end suite (.venv)"
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r tests/e2e/requirements.txt

step "end-to-end tests (pymongo against $SHALE_BIN)"
report=$(mktemp)
set +e
# Two workers (pytest-xdist), a test file to a worker (module fixtures stay shared);
# E2E_WORKERS=0 runs it in one process.
(cd tests/e2e && ../../.venv/bin/python -m pytest -q -p no:cacheprovider \
    -n "${E2E_WORKERS:-2}" --dist loadfile --junitxml="$report")
status=$?
set -e
ran=$(grep -o 'tests="[0-9]*"' "$report" | head -1 | tr -dc '0-9')
rm -f "$report"
if [ "$status" -ne 0 ]; then
    echo "end-to-end suite failed (pytest exit $status)" >&2
    exit "$status"
fi
if [ "${ran:-0}" -eq 0 ]; then
    echo "end-to-end suite ran zero tests" >&2
    exit 1
fi
echo "end-to-end tests run: $ran"

step "driver spec tests: pymongo 4.20.0's CRUD unified tests against $SHALE_BIN (tests/spec; fetches the source package on first use)"
bash tests/spec/run_crud_unified.sh

# The other suites wait on their servers far more than they compute (crud_unified: 46 s of
# wall time for 20 s of CPU), so they run in two lanes side by side, each suite with its own
# server. The first suite above made the shared virtualenv and source tree, so the lanes
# only read them.
spec_suites() {
    local suite
    for suite in "$@"; do
        echo "== driver spec suite $suite against $SHALE_BIN"
        bash tests/spec/run_pymongo_suite.sh "$suite" || return 1
    done
}
spec_lane_crud_retryable_sessions_auth() {
    spec_suites crud_unified_rs retryable_writes_rs sessions_rs auth
}
spec_lane_transactions_change_streams() {
    spec_suites transactions_rs change_streams_rs
}
step "driver spec tests in two lanes: CRUD and retryable writes, sessions and test_auth.py (--auth); transactions and change streams, all against --replSet but test_auth.py, zero failures but the CRUD floors (tests/spec)"
side_by_side spec_lane_crud_retryable_sessions_auth spec_lane_transactions_change_streams

step "wait for the background builds (the fuzz targets; the bench peers with CHECK_BENCH_PEERS=1)"
wait_background_builds

step "fuzz: wire decoder + dispatch, the BSON readers, the engine's decoders, ${FUZZ_SECONDS:-20}s each (scripts/fuzz.sh)"
SECONDS_PER_TARGET="${FUZZ_SECONDS:-20}" bash scripts/fuzz.sh --run-only
