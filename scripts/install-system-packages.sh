#!/usr/bin/env bash
# Installs the system packages blameprof's tests need, if missing:
#   gcc        compiles the C test programs and the runtime's small C shim
#   g++        the C++ test programs (shapes.cc, cxx_waits.cc; gcc's C++ compiler, cc1plus)
#   libc6-dev  C headers, and the static libc the "statically linked program" test links with
#   valgrind   callgrind, for the test that every runtime function that runs lies in its hot
#              layout (runtime/hot.ld; benchmarks/scoreboard/tests/smoke.rs)
#   golang-go  Go's own `go tool pprof`, which must read `report --format pprof` (tests/exports.rs)
#   chromium   a real headless browser for the HTML report (tests/html_report.rs)
#   bsdutils   `script`, a pseudo-terminal for the terminal tests (tests/terminal.rs)
#   libomp5    LLVM's OpenMP runtime, run in GCC's libgomp's place (tests/openmp.rs)
#   gettext    msgmerge, an OpenMP program nobody here wrote (tests/distribution.rs)
#   sysbench, stress-ng, python3, rocksdb-tools (db_bench), memcached, libmemcached-tools
#              (memcslap, its load generator)
#              programs nobody here wrote, profiled as users bring them (tests/distribution.rs:
#              /usr/bin's own, not another python3 earlier on PATH)
# Benchmarks additionally use linux-perf (perf record) when present; tests do not need it.
set -euo pipefail
missing=()
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
[ -f /usr/include/stdio.h ] && [ -n "$(gcc -print-file-name=libc.a 2>/dev/null | grep /)" ] || missing+=(libc6-dev)
command -v valgrind >/dev/null 2>&1 || missing+=(valgrind)
command -v go >/dev/null 2>&1 || missing+=(golang-go)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v script >/dev/null 2>&1 || missing+=(bsdutils)
[ -e /usr/lib/x86_64-linux-gnu/libomp.so.5 ] || missing+=(libomp5)
[ -x /usr/bin/msgmerge ] || missing+=(gettext)
[ -x /usr/bin/sysbench ] || missing+=(sysbench)
[ -x /usr/bin/stress-ng ] || missing+=(stress-ng)
[ -x /usr/bin/python3 ] || missing+=(python3)
[ -x /usr/bin/db_bench ] || missing+=(rocksdb-tools)
[ -x /usr/bin/memcached ] || missing+=(memcached)
[ -x /usr/bin/memcslap ] || missing+=(libmemcached-tools)
if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: all present (gcc, g++, libc6-dev, valgrind, golang-go, chromium, bsdutils, libomp5, gettext, sysbench, stress-ng, python3, rocksdb-tools, memcached, libmemcached-tools)"
  exit 0
fi
echo "system packages: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}"
