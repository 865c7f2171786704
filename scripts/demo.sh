#!/usr/bin/env bash
# Show sglang-sentinel on the bundled demo logs: a scan report of the journal case, then of the
# container case (the same two startups as a Docker json-file log and as Kubernetes pod logs),
# then the daemon following all three with metrics.
# DEMO_NO_FOLLOW=1 stops after the scans (tests, CI); DEMO_PART=journal or containers shows
# one case only; DEMO_SENTINEL names another sentinel executable (tests).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

SENTINEL=${DEMO_SENTINEL:-.venv/bin/sentinel}
JOURNAL_REMOTE=/lib/systemd/systemd-journal-remote
LISTEN=${DEMO_LISTEN:-127.0.0.1:19110}
PART=${DEMO_PART:-all}
case $PART in
    all | journal | containers) ;;
    *)
        echo "demo: DEMO_PART must be all, journal or containers, not '$PART'" >&2
        exit 2
        ;;
esac

needs=("$SENTINEL")
[[ $PART == containers ]] || needs+=("$JOURNAL_REMOTE")
for need in "${needs[@]}"; do
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

# The container case: demo/docker and demo/pods, made from demo/journal.export by
# tools/demo_files.py (read in place, read-only).
files=(--container sglang-qwen --docker-root demo/docker
    --pod default/sglang-qwen/sglang --pod-logs demo/pods)

if [[ $PART != containers ]]; then
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
fi
if [[ $PART != journal ]]; then
    echo "demo: the same startups in a container: Docker's json-file log (demo/docker) and" \
        "Kubernetes pod logs (demo/pods; startup 2 in a rollout's new pod)" >&2
    echo "demo: sentinel scan ${files[*]} --state-dir $work/state-files" >&2
    echo
    "$SENTINEL" scan "${files[@]}" --state-dir "$work/state-files"
    echo
fi

if [[ ${DEMO_NO_FOLLOW:-0} == 1 ]]; then
    exit 0
fi
if ! "$SENTINEL" run --help >/dev/null 2>&1; then
    echo "demo: this build has no 'sentinel run' yet; stopping after the scan" >&2
    exit 0
fi
run=(--state-dir "$state_dir" --listen "$LISTEN")
case $PART in
    journal) run+=(--journal-dir "$journal_dir") ;;
    containers) run+=("${files[@]}") ;;
    all) run+=(--journal-dir "$journal_dir" --unit sglang-qwen.service "${files[@]}") ;;
esac
echo "demo: following the demo logs; metrics at http://$LISTEN/metrics, Ctrl-C to stop" >&2
# Ctrl-C reaches the daemon too; once it has shut down, end the demo normally.
trap 'echo "demo: stopped" >&2; exit 0' INT TERM
"$SENTINEL" run "${run[@]}"
