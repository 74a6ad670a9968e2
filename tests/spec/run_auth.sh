#!/usr/bin/env bash
# pymongo 4.20.0's test/test_auth.py against `shale serve --auth` (tests/spec/README.md).
#   bash tests/spec/run_auth.sh [--update-floor] [-- extra pytest args, e.g. -k scram]
exec bash "$(dirname "$0")/run_pymongo_suite.sh" auth "$@"
