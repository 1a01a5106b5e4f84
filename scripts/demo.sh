#!/usr/bin/env bash
# Builds blameprof, profiles the bundled example program (examples/hotspots.c) at 1 kHz,
# prints the run summary and the top-down report, and writes a flame graph.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --workspace
mkdir -p target/demo
gcc -O2 -g -pthread examples/hotspots.c -o target/demo/hotspots
target/release/blameprof run -F 1000 -o target/demo/hotspots.prof -- target/demo/hotspots
target/release/blameprof report target/demo/hotspots.prof --view top-down
target/release/blameprof flamegraph target/demo/hotspots.prof -o target/demo/hotspots.svg
