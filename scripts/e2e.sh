#!/usr/bin/env bash
# The end-to-end under a real systemd PID 1 (tests/e2e/run.py): Debian 12 and 13 roots booted
# with systemd-nspawn, installed as the README says. `make e2e`, or: bash scripts/e2e.sh [SUITE...]
# Run as root. Installs mmdebstrap and systemd-container when missing.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf 'e2e: %s\n' "$*" >&2; }

if [[ $(id -u) -ne 0 ]]; then
    say "needs root (mmdebstrap, systemd-nspawn, nsenter)"
    exit 2
fi

# mmdebstrap: the Debian roots; systemd-container: systemd-nspawn; util-linux: nsenter.
missing=()
for pkg in mmdebstrap systemd-container util-linux; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$pkg")
    fi
done
command -v python3 >/dev/null || missing+=(python3)  # the harness: stdlib only
if ((${#missing[@]})); then
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    # Without systemd as PID 1, package scripts must not try to start services.
    policy=/usr/sbin/policy-rc.d
    ours=0
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod 755 "$policy"
        ours=1
    fi
    status=0
    { apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; } >&2 || status=$?
    ((ours)) && rm -f "$policy"
    ((status == 0)) || exit "$status"
    # systemd-container's postinst enables machines.target: nothing the e2e installs as a tool
    # starts on the host's next boot (.ci/run's footprint check failed on a fresh machine).
    bash "$(dirname "${BASH_SOURCE[0]}")/disable-units.sh" "an e2e tool" "${missing[@]}"
fi

work=${E2E_WORK:-$(mktemp -d /var/tmp/sentinel-e2e.XXXXXX)}
export E2E_WORK=$work
# A second line of defence if the harness itself is killed: power off the containers it
# started (their nspawn PIDs are in *.nspawn.pid) and remove the roots. Logs are kept on failure.
cleanup() {
    local status=$? pidfile pid
    for pidfile in "$work"/*.nspawn.pid; do
        [[ -e $pidfile ]] || continue
        pid=$(<"$pidfile")
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            timeout 60 tail --pid="$pid" -f /dev/null || kill -KILL "$pid" 2>/dev/null || true
        fi
        rm -f "$pidfile"
    done
    rm -rf --one-file-system "$work"/*-root
    if [[ $status -eq 0 ]]; then
        rm -rf --one-file-system "$work"
    else
        say "logs kept in $work"
    fi
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

python3 tests/e2e/run.py "$@"
