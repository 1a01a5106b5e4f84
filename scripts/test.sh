#!/usr/bin/env bash
# The whole test suite, in one command on a fresh machine: installs the system packages the
# tests need (scripts/install-system-packages.sh; nothing when they are present), then checks
# the formatting, builds, runs every test of every test binary and clippy, and ends with a
# tally of them all. The README's test command; `.ci/run` runs exactly this.
#
# The tally counts every test of every test binary: `cargo test --no-fail-fast` runs them all
# even when one fails (without it cargo stops at the first failing binary, and the tests of
# the binaries after it are counted nowhere). Its last line is
#   ci: N passed, N failed, N skipped
# where skipped = the #[ignore]d tests (each says why in its reason) + the tests that found a
# facility they need missing at run time and said so on stdout with one line
#   skipped: <test name>: <reason>
# (tests/common/mod.rs, `skip`): such a test returns early, so libtest counts it as passed;
# here it is counted as skipped and not as passed. The exit status is non-zero when anything
# failed (formatting, build, a test, clippy).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-system-packages.sh
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
(cargo fmt --all --check && cargo build --release --workspace && cargo test --release --workspace --no-fail-fast && cargo clippy --workspace --all-targets -- -D warnings) 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
# The tally's greps find nothing when nothing ran: no exit on their status.
passed=$(grep -Eo '^test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{ s += $4 } END { print s + 0 }')
failed=$(grep -Eo '^test result: [a-zA-Z]+\. .* [0-9]+ failed;' "$log" | grep -Eo '[0-9]+ failed' | awk '{ s += $1 } END { print s + 0 }')
ignored=$(grep -Eo '^test result: [a-zA-Z]+\. .* [0-9]+ ignored;' "$log" | grep -Eo '[0-9]+ ignored' | awk '{ s += $1 } END { print s + 0 }')
# A test binary that died (a signal, an abort) prints no result line: each counts as a failure.
crashed=$(grep -Ec "process didn't exit successfully: .*\(signal: " "$log" || true)
failed=$((failed + crashed))
# Tests skipped at run time: counted once each, and only those libtest reported as passed
# (a test that said it skipped and then failed is a failure, counted as such).
runtime_skipped=0
while IFS= read -r name; do
  [ -n "$name" ] || continue
  if grep -Fqx "test $name ... ok" "$log"; then
    runtime_skipped=$((runtime_skipped + 1))
    grep -m 1 -F "skipped: $name: " "$log" | sed 's/^/ci: /'
  fi
done < <(grep -E '^skipped: [^ ]+: ' "$log" | sed -E 's/^skipped: ([^ ]+): .*/\1/' | sort -u)
passed=$((passed - runtime_skipped))
if [ "$status" -eq 0 ] && [ "$passed" -eq 0 ]; then
  echo "ci: no test ran"
  exit 1
fi
# Ignored tests are known defects kept visible (each says why in its #[ignore] reason).
if [ "$ignored" -gt 0 ]; then
  grep -E '^test .* \.\.\. ignored' "$log" | sed 's/^/ci: ignored: /'
fi
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then
  echo "ci: failed outside the tests (formatting, build or clippy): see above"
fi
echo "ci: $passed passed, $failed failed, $((ignored + runtime_skipped)) skipped"
exit "$status"
