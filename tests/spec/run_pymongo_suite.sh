#!/usr/bin/env bash
# Runs one of pymongo 4.20.0's test files from its source package against the real `shale`
# binary, prints the passed/failed/errored/skipped counts and fails if fewer tests pass than
# the suite's floor (tests/spec/<suite>_floor.txt) or if the server crashed or hung. Suites:
# crud_unified (test/test_crud_unified.py over test/crud/unified/*.json) and auth
# (test/test_auth.py against a server with --auth, the harness logged in as a root user).
#
#   bash tests/spec/run_pymongo_suite.sh SUITE [--update-floor] [-- extra pytest args]
#
# Environment: SHALE_BIN (default target/release/shale), SPEC_CACHE (default
# target/spec-cache: the unpacked source package and the last run's logs live there),
# SPEC_TEST_TIMEOUT (seconds per test, default 60), SPEC_RUN_TIMEOUT (seconds for the whole
# pytest run, default 600).
set -euo pipefail
cd "$(dirname "$0")/../.."
SUITE="${1:?usage: run_pymongo_suite.sh crud_unified|auth [--update-floor] [-- pytest args]}"
shift

PYMONGO_VERSION=4.20.0
# sha256 of pymongo-4.20.0.tar.gz as PyPI serves it.
SDIST_SHA256=f773b0aec28687587cdeda490463a82debc4566a4a3620dcc8dada9d2c0a1acd

CACHE="${SPEC_CACHE:-$PWD/target/spec-cache}"
SRC="$CACHE/pymongo-$PYMONGO_VERSION"
mkdir -p "$CACHE"

# Its own virtualenv, not the repo's .venv: pymongo's test suite needs pytest-asyncio (its
# pyproject.toml configures it under --strict-config), and that plugin in .venv would warn on
# every run of the end-to-end suite, whose environment stays exactly tests/e2e/requirements.txt.
VENV="$CACHE/venv"
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/spec/requirements.txt

if [ ! -f "$SRC/test/test_crud_unified.py" ]; then
    echo "fetching the pymongo $PYMONGO_VERSION source package into $CACHE (about a minute)"
    tmp=$(mktemp -d "$CACHE/download.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
    # --no-binary for pymongo only: the wheel has no tests, and building pymongo's build
    # dependencies from source too (--no-binary :all:) takes minutes longer for the same file.
    ok=0
    for attempt in 1 2 3; do
        if "$VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
            --no-binary pymongo "pymongo==$PYMONGO_VERSION" -d "$tmp"; then
            ok=1
            break
        fi
        echo "pip download failed (attempt $attempt)" >&2
        sleep 5
    done
    [ "$ok" -eq 1 ] || { echo "could not download the pymongo $PYMONGO_VERSION sdist" >&2; exit 1; }
    tarball="$tmp/pymongo-$PYMONGO_VERSION.tar.gz"
    echo "$SDIST_SHA256  $tarball" | sha256sum --check --quiet -
    tar -xzf "$tarball" -C "$tmp"
    rm -rf "$SRC"
    mv "$tmp/pymongo-$PYMONGO_VERSION" "$SRC"
    rm -rf "$tmp"
    trap - EXIT
fi

exec "$VENV/bin/python" tests/spec/run_pymongo_suite.py --suite "$SUITE" --src "$SRC" \
    --out "$CACHE/last-run-$SUITE" "$@"
