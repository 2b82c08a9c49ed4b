# Developer and CI entry points. Each target installs what it needs.
.PHONY: setup test test-cpp test-asan test-py demo wheel conformance clean

setup:
	bash scripts/setup.sh

test:
	bash scripts/test.sh

demo: setup
	.venv/bin/python examples/demo.py

wheel:
	bash scripts/setup.sh
	.venv/bin/python -m pip wheel --no-deps -w dist .

clean:
	rm -rf build dist
