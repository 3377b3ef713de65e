#!/usr/bin/env bash
# The H200 kernel power database, third run (issue 20): config/h200-db3.yaml, as results/h200-db3/REPRODUCE.md ran it
# (`LIMIT_S=470 bash benchmarks/h200_db3.sh part1`): benchmarks/h200_db.sh with the sweep h200-db3.
exec bash "$(dirname "$0")/h200_db.sh" h200-db3 "$@"
