# Developer and CI entry points. Each target installs what it needs.
.PHONY: setup test demo wheel conformance bench clean

setup:
	bash scripts/setup.sh

test:
	bash scripts/test.sh

demo: setup
	.venv/bin/python examples/demo.py

# pynenc's conformance suites only, on every backend (also part of `make test`).
conformance: setup
	.venv/bin/python -m pytest tests_py/conformance -q -p no:cacheprovider

# Benchmarks (not tests): engine beside raw databases, and cpp_mem beside pynenc.
bench: setup
	.venv/bin/python bench/backends.py
	.venv/bin/python bench/mem_backends.py

wheel:
	bash scripts/setup.sh
	.venv/bin/python -m pip wheel --no-deps -w dist .

clean:
	rm -rf build dist
