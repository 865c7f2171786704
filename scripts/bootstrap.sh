#!/usr/bin/env bash
# Make this checkout ready for a command: system packages and .venv.
#
#   scripts/bootstrap.sh               what `make demo` and `make check` need
#   scripts/bootstrap.sh --test-peers  also the real binaries the tests and benchmarks cross
#                                      into (prometheus, prometheus-alertmanager, mtail, sqlite3)
#   SENTINEL_MYPYC=1 scripts/bootstrap.sh  .venv's hot path compiled with mypyc (setup.py), as
#                                      `make ci` tests it; =0 pure again (a new .venv is pure)
#
# Idempotent and quick when everything is already there. Run as root on a fresh Debian 12.
# Test peers are used as binaries only: a peer package this script installs gets its services
# disabled again (Debian's postinst enables prometheus and prometheus-alertmanager), so nothing
# of it starts now (policy-rc.d) or on the next boot.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf 'bootstrap: %s\n' "$*" >&2; }

# make: runs the targets; gcc, pkg-config, libsystemd-dev: build systemd-python (no wheels) and
# our C journal reader (sglang_sentinel/sources/_journalread.c; python3-dev is checked below);
# systemd: journalctl, systemd-journald, systemd-analyze; systemd-journal-remote: export -> journal.
APT_PACKAGES=(make gcc pkg-config libsystemd-dev systemd systemd-journal-remote)
# What only the tests and benchmarks use: prometheus, prometheus-alertmanager, mtail, sqlite3,
# the real binaries they cross into; chromium, fonts-dejavu-core: the status page's browser test
# (headless, with known glyphs); docker.io, containerd (its engine, listed so its unit is disabled
# too), podman and busybox-static (the test image's one binary): the real engine log tests.
PEER_PACKAGES=(prometheus prometheus-alertmanager mtail sqlite3 chromium fonts-dejavu-core
    docker.io containerd podman busybox-static)
case "${1:-}" in
    --test-peers) APT_PACKAGES+=("${PEER_PACKAGES[@]}") ;;
    "") ;;
    *)
        say "usage: $0 [--test-peers]"
        exit 2
        ;;
esac
PYTHON=${PYTHON:-python3}

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done
if ! command -v "$PYTHON" >/dev/null; then
    missing+=(python3 python3-dev python3-venv)
else
    # Debian's own python needs -dev for headers and -venv for ensurepip; pyenv's has both.
    if ! "$PYTHON" - <<'PY' 2>/dev/null; then
import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)
PY
        missing+=(python3-dev)
    fi
    if ! "$PYTHON" -c 'import ensurepip, venv' 2>/dev/null; then
        missing+=(python3-venv)
    fi
fi

if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        say "missing packages: ${missing[*]}; run: sudo apt-get install ${missing[*]}"
        exit 1
    fi
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Without systemd as PID 1, package scripts must not try to start services.
    policy=/usr/sbin/policy-rc.d
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        trap 'rm -f "$policy"' EXIT
    fi
    log=$(mktemp -t sentinel-apt.XXXXXX)
    if ! { apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; } \
        >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        say "apt-get failed; full log in $log"
        exit 1
    fi
    # Debian 13 ships the docker client apart from docker.io (a Recommends, which
    # --no-install-recommends leaves out); Debian 12's docker.io has it inside.
    if [[ " ${missing[*]} " == *" docker.io "* ]] && ! command -v docker >/dev/null &&
        apt-cache show docker-cli >/dev/null 2>&1; then
        if ! apt-get install -y --no-install-recommends docker-cli >"$log" 2>&1; then
            tail -n 40 "$log" >&2
            say "apt-get failed installing docker-cli; full log in $log"
            exit 1
        fi
        missing+=(docker-cli)
    fi
    rm -f "$log"
    # Debian enables the services of what it installs; a test peer must not start on the next
    # boot (scripts/disable-units.sh). Only the peers installed just now.
    peers=()
    for pkg in "${missing[@]}"; do
        if [[ " ${PEER_PACKAGES[*]} " == *" $pkg "* ]]; then
            peers+=("$pkg")
        fi
    done
    if ((${#peers[@]})); then
        bash scripts/disable-units.sh "a test peer" "${peers[@]}"
    fi
fi

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    say "$("$PYTHON" --version 2>&1) is too old: need Python 3.10+ (set PYTHON=...)"
    exit 1
fi

if [[ ! -x .venv/bin/python ]]; then
    say "creating .venv with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv .venv
fi

# SENTINEL_MYPYC=1 builds .venv's hot path compiled with mypyc (setup.py; `make ci` asks for it),
# SENTINEL_MYPYC=0 pure again; unset or empty keeps what .venv has (pure when new). The compiled
# modules sit beside their sources and shadow them, so a compiled .venv is rebuilt whenever one
# of those sources changes, and a pure one leaves none behind.
mode_file=.venv/.sentinel-hot-path
case ${SENTINEL_MYPYC:-} in
    1) hot_path=compiled ;;
    0) hot_path=pure ;;
    *) hot_path=$(cat "$mode_file" 2>/dev/null || echo pure) ;;
esac
mapfile -t compiled_sources < <("$PYTHON" -c \
    'import runpy; print(*runpy.run_path("sglang_sentinel/compiled.py")["COMPILED"], sep="\n")')
if [[ $hot_path == compiled ]]; then
    export SENTINEL_MYPYC=1 # pip's build reads it (setup.py)
else
    export SENTINEL_MYPYC=
    suffix=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    rm -f sglang_sentinel/_native__mypyc"$suffix"
    for source in "${compiled_sources[@]}"; do
        rm -f "${source%.py}$suffix"
    done
    compiled_sources=()
fi

stamp=.venv/.sentinel-pyproject.sha256
# setup.py and the C reader's source too: a change to either needs the extension built again;
# so does a change of the hot path's build, or of a compiled module's source.
want=$({
    echo "hot path: $hot_path"
    cat pyproject.toml setup.py tools/build_backend.py sglang_sentinel/sources/_journalread.c \
        sglang_sentinel/sources/_fileread.c
    cat sglang_sentinel/compiled.py "${compiled_sources[@]}"
} | sha256sum | cut -d' ' -f1)
have=$(cat "$stamp" 2>/dev/null || true)
# Reinstall when pyproject changed, a dependency is gone, or the editable install points at
# another checkout (a copied or moved tree).
if [[ $want != "$have" ]] || ! .venv/bin/python - "$PWD" <<'PY' 2>/dev/null; then
import importlib.util, pathlib, sys
# find_spec, not import: this runs on every bootstrap and must stay fast.
for name in ("prometheus_client", "structlog", "systemd.journal", "yaml", "hypothesis", "mypy",
             "pytest"):
    assert importlib.util.find_spec(name) is not None, name
spec = importlib.util.find_spec("sglang_sentinel")
assert spec is not None and spec.origin is not None
assert pathlib.Path(spec.origin).resolve().is_relative_to(pathlib.Path(sys.argv[1]).resolve())
assert pathlib.Path(sys.prefix, "bin", "ruff").exists()
PY
    say "installing sglang-sentinel (hot path $hot_path) and dev dependencies into .venv"
    log=.venv/.sentinel-pip.log
    if ! .venv/bin/python -m pip install -e '.[dev]' >"$log" 2>&1; then
        tail -n 40 "$log" >&2
        say "pip install failed; full log in $log"
        exit 1
    fi
    printf '%s\n' "$want" >"$stamp"
    printf '%s\n' "$hot_path" >"$mode_file"
fi
# pip builds the C journal reader when gcc and libsystemd-dev are there, else warns and the
# package reads with python-systemd; --version says which, and whether the hot path is compiled.
say "ready: $(.venv/bin/sentinel --version)"
