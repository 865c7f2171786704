#!/usr/bin/env bash
# Run the test suite on every supported Python (3.10, 3.11, 3.12, 3.13), one venv each.
#
# Interpreters come from pyenv builds (${PYENV_ROOT:-~/.pyenv}/versions/3.X.*, the newest patch
# release of each minor). Without pyenv, the only interpreter tried is Debian's own python3, and
# the script says so. In CI (CI=true) a missing minor is an error, never a silent skip.
#
#   scripts/test-pythons.sh [--skip-python PATH] [--skip-minor X.Y]... [--light-minor X.Y]...
#                           [pytest args...]
#
# --skip-python leaves out the minor version of that interpreter (make ci passes .venv's python,
# whose suite `make test` has just run); --skip-minor leaves out a minor version run elsewhere
# (.ci/run: 3.13, whose suite runs on Debian 13's own python3 inside the booted root);
# --light-minor runs that minor's suite less the tests marked heavy (their equivalence runs do
# not depend on the minor version; .ci/run keeps them on .venv's Python and 3.10). Venvs live in .venvs/pyX.Y and are reused while
# pyproject.toml, setup.py and the C reader's source are unchanged.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf 'test-pythons: %s\n' "$*" >&2; }

MINORS=(3.10 3.11 3.12 3.13)
skip_minors=" "
light_minors=" "
while (($# >= 2)); do
    case $1 in
    --skip-python) skip_minors+="$("$2" -c 'import sys; print("%d.%d" % sys.version_info[:2])') " ;;
    --skip-minor) skip_minors+="$2 " ;;
    --light-minor) light_minors+="$2 " ;;
    *) break ;;
    esac
    shift 2
done

home=${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}
pyenv_root=${PYENV_ROOT:-$home/.pyenv}

# Newest pyenv build of one minor version, e.g. 3.10 -> .../versions/3.10.13/bin/python3.10.
find_pyenv() {
    local minor=$1 dir best=""
    for dir in "$pyenv_root"/versions/"$minor".*; do
        [[ -x $dir/bin/python$minor && ${dir##*/} =~ ^$minor\.[0-9]+$ ]] || continue
        best=$(printf '%s\n%s\n' "$best" "${dir##*/}" | sed '/^$/d' | sort -V | tail -n1)
    done
    [[ -n $best ]] && printf '%s\n' "$pyenv_root/versions/$best/bin/python$minor"
}

declare -A found=()
for minor in "${MINORS[@]}"; do
    if py=$(find_pyenv "$minor"); then
        found[$minor]=$py
    fi
done
if ((${#found[@]} == 0)); then
    py=$(command -v /usr/bin/python3 || command -v python3)
    minor=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    say "no pyenv builds under $pyenv_root/versions: testing only $py (Python $minor)"
    found[$minor]=$py
    MINORS=("$minor")
fi

missing=()
for minor in "${MINORS[@]}"; do
    [[ -n ${found[$minor]:-} ]] || missing+=("$minor")
done
if ((${#missing[@]})); then
    say "no interpreter for Python ${missing[*]} under $pyenv_root/versions (pyenv install ${missing[*]})"
    [[ -z ${CI:-} ]] || exit 1
fi

# What the install builds from: a change to the C reader needs a fresh build too.
want=$(cat pyproject.toml setup.py tools/build_backend.py sglang_sentinel/sources/_journalread.c \
    sglang_sentinel/sources/_fileread.c | sha256sum | cut -d' ' -f1)
# These venvs run the hot path pure (setup.py): only .venv builds it compiled, when
# SENTINEL_MYPYC=1 asks (scripts/bootstrap.sh, make ci). A compiled module of the same Python
# version in the tree (a compiled .venv's) would still be loaded: `--version` says which runs.
export SENTINEL_MYPYC=
failed=()
summary=()
for minor in "${MINORS[@]}"; do
    py=${found[$minor]:-}
    [[ -n $py ]] || continue
    if [[ $skip_minors == *" $minor "* ]]; then
        say "Python $minor: left out (--skip-python/--skip-minor: its suite runs elsewhere)"
        continue
    fi
    venv=.venvs/py$minor
    stamp=$venv/.sentinel-pyproject.sha256
    if [[ ! -x $venv/bin/python || $(cat "$stamp" 2>/dev/null || true) != "$want" ]] ||
        ! "$venv/bin/python" -c 'import sglang_sentinel, systemd.journal, pytest, hypothesis' \
            2>/dev/null; then
        say "Python $minor: creating $venv with $("$py" --version 2>&1) ($py)"
        rm -rf "$venv"
        "$py" -m venv "$venv"
        log=$venv/.sentinel-pip.log
        if ! "$venv/bin/python" -m pip install -e '.[test]' >"$log" 2>&1; then
            tail -n 40 "$log" >&2
            say "Python $minor: pip install failed; full log in $log"
            exit 1
        fi
        printf '%s\n' "$want" >"$stamp"
    fi
    say "Python $minor: $("$venv/bin/python" --version 2>&1), running the suite"
    start=$SECONDS
    # -p no:cacheprovider: each interpreter's run must not reorder or skip by another's cache.
    light=()
    if [[ $light_minors == *" $minor "* ]]; then
        light=(-m "not engines and not heavy")  # after "$@": pytest takes the last -m
        say "Python $minor: less the tests marked heavy (--light-minor)"
    fi
    if "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" "${light[@]}"; then
        result=passed
    else
        result=FAILED
        failed+=("$minor")
    fi
    summary+=("Python $minor: $result in $((SECONDS - start)) s")
done

for line in "${summary[@]}"; do say "$line"; done
if ((${#failed[@]})); then
    say "suite failed on Python ${failed[*]}"
    exit 1
fi
