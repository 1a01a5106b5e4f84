#!/usr/bin/env bash
# Builds blameprof and profiles the bundled example, examples/orders.c (an order-processing
# service whose workers wait for a ledger lock an auditor holds too long, and for orders on
# a condition variable): prints the run summary (victims and culprits), the lock view, and
# writes the blame flame graph, the timeline and the interactive HTML report.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --workspace
mkdir -p target/demo
gcc -O2 -g -pthread examples/orders.c -o target/demo/orders
target/release/blameprof run -F 1000 -o target/demo/orders.prof -- target/demo/orders
target/release/blameprof report target/demo/orders.prof --view locks
target/release/blameprof flamegraph target/demo/orders.prof --metric blame -o target/demo/orders-blame.svg
target/release/blameprof timeline target/demo/orders.prof --interval 200ms -o target/demo/orders-timeline.svg
target/release/blameprof report target/demo/orders.prof --format html -o target/demo/orders.html
