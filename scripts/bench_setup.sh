#!/usr/bin/env bash
# Prepares what bench/peers.py needs besides .venv (which scripts/setup.sh makes):
#   * .venv-bench: the peers that install with the pinned pynenc 0.4.0 (pure
#     pynenc, pynenc-rustvello, Celery, RQ, Huey, Dramatiq, taskiq), pinned in
#     bench/requirements-peers.txt,
#     kept out of .venv so pynenc's conformance runs never load their plugins;
#   * .venv-bench-pynenc03: pynenc-redis 0.3.0, the newest release, which does not
#     run on pynenc 0.4.0 (its RedisBroker lacks 0.4.0's abstract _route_invocation),
#     on pynenc 0.3.1 (bench/requirements-pynenc03.txt);
#   * .venv-bench-casty: casty, the actor peer of bench/actors.py
#     (bench/requirements-casty.txt);
#   * psutil in .venv (S3 measures CPU time of process trees).
# Idempotent: reinstalls only when bench/requirements-peers.txt changes.
# BENCH_VENVS (default "peers,pynenc03,casty"): which of the three to make (the
# smoke test of bench/peers.py needs only "peers").
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[bench-setup] %s\n' "$*"; }

[ -x .venv/bin/python ] || bash scripts/setup.sh
PIP_FLAGS=(--disable-pip-version-check -q)
export PIP_NO_WARN_SCRIPT_LOCATION=1

.venv/bin/python -c 'import psutil' 2>/dev/null || .venv/bin/python -m pip "${PIP_FLAGS[@]}" install "psutil>=5.9"

base=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
make_venv() { # make_venv DIR REQUIREMENTS
  local venv=$1 reqs=$2 stamp want
  if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
    log "creating $venv with $base"
    rm -rf "$venv"
    "$base" -m venv "$venv"
  fi
  stamp="$venv/.peers-deps"
  want=$(sha256sum "$reqs" | cut -d' ' -f1)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    log "installing $reqs into $venv"
    "$venv/bin/python" -m pip "${PIP_FLAGS[@]}" install -r "$reqs"
    echo "$want" >"$stamp"
  fi
}
wanted() { [[ ",${BENCH_VENVS:-peers,pynenc03,casty}," == *",$1,"* ]]; }
versions() { "$1/bin/python" -c 'import importlib.metadata as m, sys
print(", ".join(f"{p} {m.version(p)}" for p in sys.argv[1:]))' "${@:2}"; }
if wanted peers; then
  make_venv .venv-bench bench/requirements-peers.txt
  log "ready: .venv-bench: $(versions .venv-bench pynenc pynenc-rustvello rustvello celery rq huey dramatiq taskiq taskiq-redis)"
fi
if wanted pynenc03; then
  make_venv .venv-bench-pynenc03 bench/requirements-pynenc03.txt
  log "ready: .venv-bench-pynenc03: $(versions .venv-bench-pynenc03 pynenc pynenc-redis)"
fi
if wanted casty; then
  make_venv .venv-bench-casty bench/requirements-casty.txt
  log "ready: .venv-bench-casty: $(versions .venv-bench-casty casty)"
fi
