#!/usr/bin/env bash
# Disable the systemd units that Debian's postinst enabled for packages installed just now as
# tools (test peers, the e2e's systemd-nspawn): nothing of them may start on the next boot.
#
#   scripts/disable-units.sh WHAT PKG...   WHAT names the use in the message ("a test peer")
#
# Services, sockets, timers and targets (systemd-container enables machines.target). Only the
# packages named: a package the host already had is the host's business. deb-systemd-helper,
# not systemctl: no PID 1 needed, and package upgrades keep the unit disabled instead of
# enabling it again. SENTINEL_SYSTEMD_DIR points the check elsewhere (tests).
set -euo pipefail
what=$1
shift
systemd_dir=${SENTINEL_SYSTEMD_DIR:-/etc/systemd/system}
for pkg in "$@"; do
    while read -r unit; do
        [[ -n $unit ]] || continue
        unit=${unit##*/}
        DPKG_MAINTSCRIPT_PACKAGE=$pkg deb-systemd-helper disable "$unit"
        if compgen -G "$systemd_dir/*.wants/$unit" >/dev/null; then
            echo "${0##*/}: could not disable $unit: $(echo "$systemd_dir"/*.wants/"$unit")" >&2
            exit 1
        fi
        echo "${0##*/}: disabled $unit (installed as $what, used as a binary only)" >&2
    done < <(dpkg -L "$pkg" | grep -E '^/(usr/)?lib/systemd/system/[^/]+\.(service|socket|timer|target)$' || true)
done
