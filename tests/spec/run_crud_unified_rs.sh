#!/usr/bin/env bash
# The drivers' CRUD unified spec tests from pymongo 4.20.0's source package against
# `shale serve --replSet rs0`, initiated before the run (tests/spec/README.md).
#   bash tests/spec/run_crud_unified_rs.sh [--update-floor] [-- extra pytest args]
exec bash "$(dirname "$0")/run_pymongo_suite.sh" crud_unified_rs "$@"
