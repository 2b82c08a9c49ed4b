#!/usr/bin/env bash
# make chaos: the whole chaos suite (tests_py/chaos, docs/reliability.md), twice:
#   1. every scenario PYNENC_CPP_CHAOS_ROUNDS times (default 5) in both modes, on
#      SQLite and Redis, with the installed engine;
#   2. every scenario once more with the engine built under AddressSanitizer +
#      UndefinedBehaviorSanitizer (build/asan-py), loaded into every process of the
#      run (test, runners, client) by tests_py/chaos/asan/sitecustomize.py.
# Prints each pass's table (tests_py/chaos/report.py) and exits non-zero if a
# scenario fails. CI (`make test`) runs each scenario once, plain.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || { echo "setup failed"; exit 1; }
JOBS=${JOBS:-2}
mkdir -p build
export PYNENC_CPP_CHAOS=full
overall=0

echo "==> chaos (installed engine)"
rm -f build/chaos-report.jsonl
PYNENC_CPP_CHAOS_REPORT=build/chaos-report.jsonl \
  .venv/bin/python -m pytest tests_py/chaos -q -p no:cacheprovider -rs ${PYTEST_ARGS:-} || overall=1
[ -s build/chaos-report.jsonl ] && .venv/bin/python tests_py/chaos/report.py build/chaos-report.jsonl

echo "==> chaos (engine under ASan + UBSan)"
if ! cmake -S . -B build/asan-py -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPYNENC_CPP_BUILD_PYTHON=ON \
       -DPYNENC_CPP_BUILD_TESTS=OFF -DPYNENC_CPP_SANITIZE_ADDRESS=ON \
       -DPython_EXECUTABLE="$PWD/.venv/bin/python" \
       -Dpybind11_DIR="$(.venv/bin/python -m pybind11 --cmakedir)" >build/asan-py.configure.log 2>&1 ||
   ! cmake --build build/asan-py -j"$JOBS" --target _core; then
  tail -n 20 build/asan-py.configure.log
  echo "chaos-asan: build failed"
  exit 1
fi
suffix=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
core=build/asan-py/bindings/_core$suffix
asan=$("${CXX:-c++}" -print-file-name=libasan.so)
# libstdc++ preloaded too: the interpreter does not link it, and ASan's
# __cxa_throw interceptor must find it at start-up, not at the extension's dlopen
# (else the first C++ exception aborts: "CHECK failed ... real___cxa_throw").
stdcxx=$("${CXX:-c++}" -print-file-name=libstdc++.so)
if [ ! -f "$core" ] || [ "${asan#/}" = "$asan" ] || [ "${stdcxx#/}" = "$stdcxx" ]; then
  echo "chaos-asan: no $core, or no libasan.so / libstdc++.so for ${CXX:-c++} (got: $asan, $stdcxx)"
  exit 1
fi
# Reports go to files as well (pytest captures the test process's stderr).
reports=build/chaos-asan-reports
rm -rf "$reports" && mkdir -p "$reports"
rm -f build/chaos-asan-report.jsonl
# Python itself is not instrumented: its allocations are not leaks of ours.
LD_PRELOAD="$asan:$stdcxx" PYNENC_CPP_CORE="$PWD/$core" \
  PYTHONPATH="$PWD/tests_py/chaos/asan${PYTHONPATH:+:$PYTHONPATH}" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:log_path="$PWD/$reports/asan" \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path="$PWD/$reports/ubsan" \
  PYNENC_CPP_CHAOS_ROUNDS=${CHAOS_ASAN_ROUNDS:-1} \
  PYNENC_CPP_CHAOS_REPORT=build/chaos-asan-report.jsonl \
  .venv/bin/python -m pytest tests_py/chaos -q -p no:cacheprovider -rs ${PYTEST_ARGS:-} || overall=1
[ -s build/chaos-asan-report.jsonl ] && .venv/bin/python tests_py/chaos/report.py build/chaos-asan-report.jsonl
if [ -n "$(ls -A "$reports")" ]; then
  echo "chaos-asan: sanitizer reports in $reports:"
  head -n 30 "$reports"/*
  overall=1
fi
exit $overall
