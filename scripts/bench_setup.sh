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
#   * .venv-bench-ardiq, .venv-bench-streaq, .venv-bench-rustvello: one venv per
#     peer that needs nothing of pynenc's: ArdiQ, streaq and rustvello standalone
#     (bench/requirements-{ardiq,streaq,rustvello}.txt). A peer that cannot be
#     installed here does not stop the script: pip's error is kept in the venv's
#     .peers-install-error, and bench/peers.py skips the peer with it as the reason;
#   * psutil in .venv (S3 measures CPU time of process trees).
# Idempotent: reinstalls a venv only when its requirements file changes.
# BENCH_VENVS (default "peers,pynenc03,casty,ardiq,streaq,rustvello"): which of
# them to make (the smoke test of bench/peers.py needs only "peers").
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[bench-setup] %s\n' "$*"; }

[ -x .venv/bin/python ] || bash scripts/setup.sh
PIP_FLAGS=(--disable-pip-version-check -q)
export PIP_NO_WARN_SCRIPT_LOCATION=1

.venv/bin/python -c 'import psutil' 2>/dev/null || .venv/bin/python -m pip "${PIP_FLAGS[@]}" install "psutil>=5.9"

base=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
make_venv() { # make_venv DIR REQUIREMENTS; returns 1 on failure (explicitly: errexit
  # does not apply where make_peer_venv calls it, inside a condition)
  local venv=$1 reqs=$2 stamp want
  if ! "$venv/bin/python" -c 'import sys' 2>/dev/null; then
    log "creating $venv with $base"
    rm -rf "$venv"
    "$base" -m venv "$venv" || return 1
  fi
  stamp="$venv/.peers-deps"
  want=$(sha256sum "$reqs" | cut -d' ' -f1) || return 1
  if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    log "installing $reqs into $venv"
    "$venv/bin/python" -m pip "${PIP_FLAGS[@]}" install -r "$reqs" || return 1
    echo "$want" >"$stamp"
  fi
}
# make_peer_venv DIR REQUIREMENTS: make_venv for a peer that may be skipped. If the
# venv cannot be made or its requirements cannot be installed (no wheel for this
# Python, a build that fails), pip's last lines go to DIR/.peers-install-error,
# which bench/peers.py reports as the peer's reason to be skipped, and the script
# goes on; a later run that succeeds removes the file.
make_peer_venv() {
  local venv=$1 reqs=$2 out
  if out=$(make_venv "$venv" "$reqs" 2>&1); then
    [ -z "$out" ] || printf '%s\n' "$out"
    rm -f "$venv/.peers-install-error"
    return 0
  fi
  printf '%s\n' "$out" >&2
  mkdir -p "$venv"
  printf 'installing %s failed: %s\n' "$reqs" \
    "$(printf '%s\n' "$out" | grep -v '^\[bench-setup\]' | tail -n 5 | tr '\n' ' ')" \
    >"$venv/.peers-install-error"
  log "WARNING: $venv: installing $reqs failed; bench/peers.py skips the peer with the reason"
  return 1
}
wanted() { [[ ",${BENCH_VENVS:-peers,pynenc03,casty,ardiq,streaq,rustvello}," == *",$1,"* ]]; }
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
if wanted ardiq && make_peer_venv .venv-bench-ardiq bench/requirements-ardiq.txt; then
  log "ready: .venv-bench-ardiq: $(versions .venv-bench-ardiq ardiq)"
fi
if wanted streaq && make_peer_venv .venv-bench-streaq bench/requirements-streaq.txt; then
  log "ready: .venv-bench-streaq: $(versions .venv-bench-streaq streaq coredis)"
fi
if wanted rustvello && make_peer_venv .venv-bench-rustvello bench/requirements-rustvello.txt; then
  log "ready: .venv-bench-rustvello: $(versions .venv-bench-rustvello rustvello)"
fi
