#!/usr/bin/env bash
# The drivers' CRUD unified spec tests from pymongo 4.20.0's source package (tests/spec/README.md).
#   bash tests/spec/run_crud_unified.sh [--update-floor] [-- extra pytest args, e.g. -k insertOne]
exec bash "$(dirname "$0")/run_pymongo_suite.sh" crud_unified "$@"
