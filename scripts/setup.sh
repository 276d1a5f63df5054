#!/usr/bin/env bash
# Set up what trainimg needs on a fresh Debian 12 machine (root, no GPU, no registry), by need:
#   scripts/setup.sh --demo   the main job (scripts/demo.sh): podman, runc, debootstrap and a
#                             virtual environment in .venv (the toolkit, the CPU torch wheel)
#   scripts/setup.sh          the tests (scripts/test.sh, CI): all of that, and the services and
#                             tools the suite starts itself (dockerd, a registry, Slurm, munge,
#                             sshd, dnf/rpm, ...)
# A package that starts a service when installed (on a systemd host: docker.io, slurmd, munge,
# openssh-server, ...) is installed with services held back (policy-rc.d), and a unit that
# the install enabled is disabled again: setup never leaves a service running or enabled that
# was not before (the suite starts its own, by pid). Safe to run again: it skips what is
# already there. When another apt or dpkg (unattended-upgrades, a second setup) holds the
# package locks, it says who and waits for them, at most $TRAINIMG_APT_LOCK_WAIT seconds
# (default 1200).
set -euo pipefail

# tool -> Debian package, for the main job (--demo): podman drives the builds (its API service),
# with runc as its runtime; debootstrap makes the offline base.
declare -A demo_pkg=([podman]=podman [runc]=runc [debootstrap]=debootstrap)
# tool -> Debian package, for the tests beside those. docker.io gives dockerd (the tests start
# a private Docker Engine), docker-registry a local registry for push/pin tests, apache2-utils
# htpasswd, openssl a CA; dnf, rpmbuild, createrepo_c (packages dnf, rpm, createrepo-c) and gpg
# (gnupg, which rpmsign signs with): tests/el9's rehearsal builds signed stand-in RPMs and
# installs them with dnf 4.14 / libdnf 0.69, the versions EL9 ships; gpg also signs images in
# the `trainimg push --sign` tests (podman's simple signing). slurmctld, slurmd, the Slurm
# clients and munge: tests/launch runs a real two-node Slurm (in network namespaces: ip,
# nsenter); squashfs-tools' sqfstar writes enroot images (`trainimg export X.sqsh`).
# openssh-server: tests/preflight's fleet runs real sshd hosts in network namespaces, and
# nftables' nft drops one host's packets mid-run. chromium: the `preflight --html` page is
# rendered in Debian's headless Chromium (its DOM and a screenshot).
declare -A test_pkg=([/usr/sbin/dockerd]=docker.io [docker-registry]=docker-registry [htpasswd]=apache2-utils
    [openssl]=openssl [dnf]=dnf [rpmbuild]=rpm [createrepo_c]=createrepo-c
    [slurmctld]=slurmctld [slurmd]=slurmd [sbatch]=slurm-client [munged]=munge
    [sqfstar]=squashfs-tools [ip]=iproute2 [nsenter]=util-linux [gpg]=gnupg
    [/usr/sbin/sshd]=openssh-server [nft]=nftables [chromium]=chromium)
# The systemd units those packages may enable and start on install.
SERVICE_UNITS=(docker.service docker.socket docker-registry.service slurmctld.service
    slurmd.service munge.service ssh.service ssh.socket nftables.service podman.socket
    podman.service)

# The Debian packages `need` (demo or tests) still lacks, one a line (a tool not on PATH).
missing_packages() {
    local need=$1 tool
    for tool in "${!demo_pkg[@]}"; do
        command -v "$tool" >/dev/null 2>&1 || echo "${demo_pkg[$tool]}"
    done
    if [ "$need" = tests ]; then
        for tool in "${!test_pkg[@]}"; do
            command -v "$tool" >/dev/null 2>&1 || echo "${test_pkg[$tool]}"
        done
    fi
}

# The locks apt-get and dpkg take (fcntl locks: /proc/locks lists their holders).
APT_LOCKS=(/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/lib/apt/lists/lock
    /var/cache/apt/archives/lock)
APT_LOCK_WAIT=${TRAINIMG_APT_LOCK_WAIT:-1200}
APT_LOCK_POLL=5

# "PID PATH" of a held lock of APT_LOCKS, or nothing. /proc/locks names a file by device and
# inode; the inode alone is matched (a clash only makes us wait longer). Waiters ("->") hold
# nothing; an open-file-description lock has no pid (-1).
apt_lock_holder() {
    local path inode pid
    for path in "${APT_LOCKS[@]}"; do
        [ -e "$path" ] || continue
        inode=$(stat -c %i "$path")
        pid=$(awk -v inode="$inode" \
            '$2 != "->" { n = split($6, id, ":"); if (id[n] == inode) { print $5; exit } }' \
            /proc/locks)
        if [ -n "$pid" ]; then
            echo "$pid $path"
            return
        fi
    done
}

# Wait (bounded, saying so) until no other apt/dpkg holds APT_LOCKS.
wait_for_apt_locks() {
    local start=$SECONDS holder pid said=-1
    while holder=$(apt_lock_holder) && [ -n "$holder" ]; do
        pid=${holder%% *}
        if ((SECONDS - start >= APT_LOCK_WAIT)); then
            echo "setup: ${holder#* } is still held by pid $pid after ${APT_LOCK_WAIT}s;" \
                "let it finish (or stop it), then run scripts/setup.sh again" \
                "(TRAINIMG_APT_LOCK_WAIT=SECONDS waits longer)" >&2
            return 1
        fi
        if ((said < 0 || SECONDS - said >= 60)); then
            echo "setup: waiting for another apt/dpkg to finish: pid $pid" \
                "($(tr '\0\n\t' '   ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-80)) holds" \
                "${holder#* }; waited $((SECONDS - start))s of at most ${APT_LOCK_WAIT}s" >&2
            said=$SECONDS
        fi
        sleep "$APT_LOCK_POLL"
    done
}

# apt-get once the locks are free; DPkg::Lock::Timeout covers a dpkg that starts in between.
apt_get() {
    wait_for_apt_locks
    apt-get -o DPkg::Lock::Timeout="$APT_LOCK_WAIT" "$@"
}

# systemd is this machine's init (a unit could start); where it is not, nothing can start.
have_systemd() { [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; }

# Debian's maintainer scripts ask this program whether they may start a service (101: no).
POLICY_RC=/usr/sbin/policy-rc.d

# The SERVICE_UNITS that are enabled now, one a line.
enabled_units() {
    local unit
    have_systemd || return 0
    for unit in "${SERVICE_UNITS[@]}"; do
        if systemctl is-enabled --quiet "$unit" 2>/dev/null; then echo "$unit"; fi
    done
}

# Install packages with no service started (policy-rc.d 101: Debian's maintainer scripts do not
# start or restart units), then stop and disable any unit the install enabled.
install_quietly() {
    local before unit policy=$POLICY_RC ours=0
    before=$(enabled_units)
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\n# trainimg setup: no service starts while it installs packages\nexit 101\n' \
            >"$policy"
        chmod 755 "$policy"
        ours=1
    fi
    export DEBIAN_FRONTEND=noninteractive
    local status=0
    { apt_get update -qq && apt_get install -y -qq "$@" >/dev/null; } || status=$?
    if ((ours)); then rm -f "$policy"; fi
    ((status == 0)) || return "$status"
    for unit in $(enabled_units); do
        if ! grep -qx "$unit" <<<"$before"; then
            echo "setup: $unit was enabled by its package: disabling it (the tests start their" \
                "own; enable it yourself if you want it)" >&2
            systemctl disable --now --quiet "$unit" || true
        fi
    done
}

main() {
    cd "$(dirname "${BASH_SOURCE[0]}")/.."
    local need=tests
    case "${1:-}" in
    --demo) need=demo ;;
    "") ;;
    *)
        echo "usage: scripts/setup.sh [--demo]  (--demo: only what scripts/demo.sh needs)" >&2
        return 2
        ;;
    esac
    local need_apt=()
    mapfile -t need_apt < <(missing_packages "$need" | sort -u)
    if ((${#need_apt[@]})); then
        echo "setup: installing ${need_apt[*]} from Debian" >&2
        install_quietly "${need_apt[@]}"
    fi

    if [ ! -x .venv/bin/python ]; then
        python3 -m venv .venv
    fi
    # torch 2.13.0 is the CPU wheel that lies in /opt/wheels on these machines (pip finds it
    # there); pinning it keeps pip from pulling a multi-GB CUDA build.
    .venv/bin/pip install -q --disable-pip-version-check torch==2.13.0
    .venv/bin/pip install -q --disable-pip-version-check -e '.[trainer,dev]'
    echo "setup: ready (.venv)" >&2
}

# Sourced (tests/test_setup_sh.py), it only defines the functions above.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
    main "$@"
fi
