#!/usr/bin/env bash
# Short fuzzing runs of every cargo-fuzz target (fuzz/): the wire decoder with command
# dispatch on a real database, the BSON readers (matcher, projection, update, pipeline,
# key encoding), and the engine's on-disk decoders (node blocks, basements, block file
# headers and tables, log frames and records). `SECONDS_PER_TARGET` (default 30) bounds
# each run; a crash fails the script and leaves the input under fuzz/artifacts/<target>/.
# Runs on the pinned stable toolchain (RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its coverage
# flags; no sanitizer, `-s none`), so nothing but cargo-fuzz itself is downloaded. Seeds: fuzz/seeds/<target>/.
# `--build-only` installs cargo-fuzz and builds the targets; `--run-only` runs them (building
# what is stale); no argument does both. scripts/test.sh builds in the background while its
# wire suites wait on their servers, then runs.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${SECONDS_PER_TARGET:-30}"
mode="${1:-all}"
case "$mode" in
    all | --build-only | --run-only) ;;
    *) echo "usage: scripts/fuzz.sh [--build-only | --run-only]" >&2; exit 2 ;;
esac
if [ "$mode" != --run-only ] && ! cargo fuzz --version >/dev/null 2>&1; then
    # Unoptimized: it only drives cargo and libFuzzer, and builds in 28 s here, not 47.
    echo "installing cargo-fuzz 0.13.2 into ${CARGO_HOME:-$HOME/.cargo}/bin (cargo install --debug)"
    cargo install cargo-fuzz --version 0.13.2 --locked --debug
fi
# Built once up front with cargo's progress shown: the first build compiles the workspace
# with coverage instrumentation into fuzz/target and takes minutes; the runs below reuse it.
if [ "$mode" != --run-only ]; then
    echo "== building the fuzz targets (cargo fuzz build; minutes on the first run, into fuzz/target)"
    RUSTC_BOOTSTRAP=1 cargo fuzz build -s none
fi
[ "$mode" = --build-only ] && exit 0
for target in wire_message bson_readers engine_decoders; do
    echo "== fuzz $target for ${secs}s"
    corpus="${CARGO_TARGET_DIR:-target}/fuzz-corpus/$target"
    mkdir -p "$corpus"
    RUSTC_BOOTSTRAP=1 cargo fuzz run -s none "$target" "$corpus" "fuzz/seeds/$target" -- \
        -max_total_time="$secs" -rss_limit_mb=4096 >"$corpus.log" 2>&1 || {
        tail -n 40 "$corpus.log"
        echo "fuzz target $target failed; the input is under fuzz/artifacts/$target/" >&2
        exit 1
    }
    grep -E '^Done' "$corpus.log" || tail -n 3 "$corpus.log"
done
