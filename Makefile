# Developer and CI entry points. Each target installs what it needs.
.PHONY: setup test demo wheel conformance chaos guarantees bench bench-peers bench-prefetch bench-concurrency bench-triggers profile profile-serial bench-redis-cost bench-cluster bench-actors clean

setup:
	bash scripts/setup.sh

test:
	bash scripts/test.sh

demo: setup
	.venv/bin/python examples/demo.py

# pynenc's conformance suites only: the whole matrix, every backend in both modes
# with every runner, with the shortcuts on and then off (`make test` runs a
# representative slice of it, and a shorter one with the shortcuts off).
conformance: setup
	PYNENC_CPP_CONFORMANCE=full .venv/bin/python -m pytest tests_py/conformance -q -p no:cacheprovider
	# Then pynenc's runner combination suites on CppRunner with a prefetch of 4
	# (cpp_runner_prefetch; its default is 1), SQLite and Redis, native mode.
	PYNENC__CPP_RUNNER_PREFETCH=4 PYNENC_CPP_BACKENDS=sqlite,redis PYNENC_CPP_MODES=native \
	  .venv/bin/python -m pytest tests_py/conformance/test_integration_combinations.py -q \
	  -p no:cacheprovider -k "not Thread and not Process"
	# Then the whole matrix again with every shortcut off (docs/shortcuts.md): pynenc's
	# own code wherever pynenc-cpp has a shortcut.
	PYNENC_CPP_SHORTCUTS=off PYNENC_CPP_CONFORMANCE=full .venv/bin/python -m pytest \
	  tests_py/conformance -q -p no:cacheprovider

# The chaos suite in full (tests_py/chaos, docs/reliability.md): every scenario
# five times in both modes on SQLite and Redis, then once more with the engine built
# under ASan + UBSan (`make test` runs each scenario once, plain).
chaos:
	bash scripts/chaos.sh

# The guarantees suite in full (tests_py/chaos/test_guarantees.py, docs/reliability.md):
# pynenc's running and registration concurrency, retries and status histories checked
# after real runner and client processes, every scenario on SQLite and Redis in both
# modes (`make test` runs a slice: one mode per backend).
guarantees: setup
	PYNENC_CPP_GUARANTEES=full .venv/bin/python -m pytest tests_py/chaos/test_guarantees.py \
	  tests_py/chaos/test_guarantees_checker.py -q -p no:cacheprovider -s

# Benchmarks (not tests): engine beside raw databases, and cpp_mem beside pynenc.
bench: setup
	.venv/bin/python bench/backends.py
	.venv/bin/python bench/mem_backends.py

# pynenc-cpp beside pure pynenc, pynenc-redis, pynenc-rustvello, Celery and RQ on
# one local redis-server (docs/performance.md). ARGS="--quick" for a smoke run.
bench-peers: setup
	bash scripts/bench_setup.sh
	.venv/bin/python bench/peers.py $(ARGS)

# The runner's drain rate by cpp_runner_prefetch (K), the figure K's default is
# chosen by (docs/performance.md, "Prefetch, measured").
bench-prefetch: setup
	.venv/bin/python bench/prefetch.py $(ARGS)

# Running concurrency control under load: overlapping bodies per 100 calls on one key
# and the check's cost, this package's gate beside pynenc's check in Python and
# pynenc's own SQLite backend (docs/reliability.md). ARGS="--quick" for one round.
bench-concurrency: setup
	.venv/bin/python bench/concurrency.py $(ARGS)

# Status- and cron-trigger latency per backend beside pynenc's own (docs/performance.md).
bench-triggers: setup
	.venv/bin/python bench/triggers.py $(ARGS)

# Where a burst's time goes: py-spy on the client and the runner, perf on the runner,
# Redis round trips and GIL acquisitions per task (docs/performance.md).
# ARGS="--stack cpp-sqlite --mode mixed" etc.
profile: setup
	.venv/bin/python -c 'import psutil' 2>/dev/null || .venv/bin/python -m pip -q install "psutil>=5.9"
	[ -x .venv/bin/py-spy ] || .venv/bin/python -m pip -q install "py-spy>=0.4"
	command -v perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf; }
	.venv/bin/python bench/profile_burst.py --perf $(ARGS)

# What a task costs redis-server, as an instruction count: a burst captured with
# MONITOR, replayed under callgrind (steady where CPU times are noisy). ARGS="--n 300".
bench-redis-cost: setup
	.venv/bin/python -c 'import psutil' 2>/dev/null || .venv/bin/python -m pip -q install "psutil>=5.9"
	command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }
	.venv/bin/python bench/redis_server_cost.py $(ARGS)

# Where a serial task's time goes (S2): submit, to the body, to the result, and on
# Redis each script's server time (SLOWLOG). ARGS="--stack cpp-sqlite" etc.
profile-serial: setup
	.venv/bin/python bench/profile_serial.py $(ARGS)

# Cluster failover with real processes on loopback (docs/cluster/python.md).
# ARGS="--quick" for a smoke run.
bench-cluster: setup
	.venv/bin/python bench/cluster_failover.py $(ARGS)

# Actors on the cluster: ask latency, failover and graceful handover of a singleton,
# beside casty when scripts/bench_setup.sh made its venv (docs/cluster/actors.md).
# ARGS="--quick" for a smoke run.
bench-actors: setup
	bash scripts/bench_setup.sh
	.venv/bin/python bench/actors.py $(ARGS)

# The sdist and a manylinux wheel per supported CPython (3.12 and 3.13) in dist/, then
# the user-view test (tests_py/test_wheel.py) on each wheel (docs/building.md, "Wheels").
wheel: setup
	bash scripts/build_wheels.sh --out dist
	bash -c 'source scripts/find_python.sh; rc=0; for w in dist/pynenc_cpp-*.whl; do \
	  v=$$(sed -E "s/.*-cp3([0-9]+)-cp3.*/3.\1/" <<<"$${w##*/}"); \
	  PYNENC_CPP_WHEEL=$$PWD/$$w PYNENC_CPP_WHEEL_PYTHON=$$(find_python_version $$v) \
	    .venv/bin/python -m pytest -q -p no:cacheprovider tests_py/test_wheel.py -k "not system_library" || rc=1; \
	done; exit $$rc'

clean:
	rm -rf build dist
