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
    end_step
    step_name=""
    printf '\n==> step times (total %ds, exit %d)\n' "$SECONDS" "$status"
    printf '%s\n' "${timings[@]}" | cut -c1-110
}
trap print_timings EXIT

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "cargo test"
cargo test --workspace --locked

step "build the shale binary for the end-to-end suite"
cargo build --locked -p shale-cli
export SHALE_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug/shale"

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
(cd tests/e2e && ../../.venv/bin/python -m pytest -q -p no:cacheprovider --junitxml="$report")
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

step "driver spec tests: pymongo 4.20.0's CRUD unified tests against $SHALE_BIN (tests/spec)"
bash tests/spec/run_crud_unified.sh

step "driver spec tests: the same CRUD unified tests against $SHALE_BIN --replSet (tests/spec)"
bash tests/spec/run_crud_unified_rs.sh

step "driver spec tests: pymongo 4.20.0's retryable writes unified tests against $SHALE_BIN --replSet, zero failures (tests/spec)"
bash tests/spec/run_pymongo_suite.sh retryable_writes_rs

step "driver spec tests: pymongo 4.20.0's transactions unified tests against $SHALE_BIN --replSet, zero failures (tests/spec)"
bash tests/spec/run_pymongo_suite.sh transactions_rs

step "driver spec tests: pymongo 4.20.0's sessions unified tests (snapshot sessions) against $SHALE_BIN --replSet, zero failures (tests/spec)"
bash tests/spec/run_pymongo_suite.sh sessions_rs

step "driver spec tests: pymongo 4.20.0's change stream tests against $SHALE_BIN --replSet, zero failures (tests/spec)"
bash tests/spec/run_pymongo_suite.sh change_streams_rs

step "pymongo 4.20.0's test/test_auth.py against $SHALE_BIN --auth (tests/spec)"
bash tests/spec/run_auth.sh

step "fuzz: wire decoder + dispatch, the BSON readers, the engine's decoders, ${FUZZ_SECONDS:-20}s each (scripts/fuzz.sh)"
SECONDS_PER_TARGET="${FUZZ_SECONDS:-20}" bash scripts/fuzz.sh
