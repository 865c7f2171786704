#!/usr/bin/env bash
# Show sglang-sentinel on the bundled demo journal: a scan report, then the daemon with metrics.
# DEMO_NO_FOLLOW=1 stops after the scan (tests, CI).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

SENTINEL=.venv/bin/sentinel
JOURNAL_REMOTE=/lib/systemd/systemd-journal-remote
LISTEN=${DEMO_LISTEN:-127.0.0.1:19110}

for need in "$SENTINEL" "$JOURNAL_REMOTE"; do
    if [[ ! -x $need ]]; then
        echo "demo: $need is missing; run: bash scripts/bootstrap.sh (or make demo)" >&2
        exit 1
    fi
done

work=$(mktemp -d -t sentinel-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT
journal_dir=$work/journal
state_dir=$work/state
mkdir -p "$journal_dir" "$state_dir"

# journal-remote insists on an output file name ending in .journal.
if ! out=$("$JOURNAL_REMOTE" --output="$journal_dir/demo.journal" demo/journal.export 2>&1); then
    echo "demo: systemd-journal-remote failed: $out" >&2
    exit 1
fi
echo "demo: journal from demo/journal.export in $journal_dir" >&2
echo "demo: sentinel scan --journal-dir $journal_dir --state-dir $state_dir" >&2
echo
"$SENTINEL" scan --journal-dir "$journal_dir" --state-dir "$state_dir"
echo

if [[ ${DEMO_NO_FOLLOW:-0} == 1 ]]; then
    exit 0
fi
if ! "$SENTINEL" run --help >/dev/null 2>&1; then
    echo "demo: this build has no 'sentinel run' yet; stopping after the scan" >&2
    exit 0
fi
echo "demo: following the journal; metrics at http://$LISTEN/metrics, Ctrl-C to stop" >&2
# Ctrl-C reaches the daemon too; once it has shut down, end the demo normally.
trap 'echo "demo: stopped" >&2; exit 0' INT TERM
"$SENTINEL" run --journal-dir "$journal_dir" --state-dir "$state_dir" --listen "$LISTEN"
