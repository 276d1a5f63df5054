#!/usr/bin/env bash
# Set up everything trainimg needs on a fresh Debian 12 machine (root, no GPU, no registry):
# podman and friends from Debian, and a virtual environment in .venv with the toolkit, its
# test tools and the CPU torch wheel. Safe to run again: it skips what is already there. When
# another apt or dpkg (unattended-upgrades, a second setup) holds the package locks, it says
# who and waits for them, at most $TRAINIMG_APT_LOCK_WAIT seconds (default 1200).
set -euo pipefail

# tool -> Debian package. docker.io gives dockerd (the tests start a private Docker Engine),
# docker-registry a local registry for push/pin tests, apache2-utils htpasswd, openssl a CA;
# dnf, rpmbuild, createrepo_c (packages dnf, rpm, createrepo-c) and gpg (gnupg, which rpmsign
# signs with): tests/el9's rehearsal builds signed stand-in RPMs and installs them with dnf 4.14 /
# libdnf 0.69, the versions EL9 ships; gpg also signs images in the `trainimg push --sign` tests
# (podman's simple signing). slurmctld, slurmd, the Slurm clients and munge: tests/run runs a
# real two-node Slurm (in network namespaces: ip, nsenter); squashfs-tools' sqfstar writes
# enroot images (`trainimg export X.sqsh`).
declare -A apt_pkg=([podman]=podman [buildah]=buildah [runc]=runc [debootstrap]=debootstrap
    [/usr/sbin/dockerd]=docker.io [docker-registry]=docker-registry [htpasswd]=apache2-utils
    [openssl]=openssl [dnf]=dnf [rpmbuild]=rpm [createrepo_c]=createrepo-c
    [slurmctld]=slurmctld [slurmd]=slurmd [sbatch]=slurm-client [munged]=munge
    [sqfstar]=squashfs-tools [ip]=iproute2 [nsenter]=util-linux [gpg]=gnupg)

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

main() {
    cd "$(dirname "${BASH_SOURCE[0]}")/.."
    local need_apt=() tool
    for tool in "${!apt_pkg[@]}"; do
        command -v "$tool" >/dev/null 2>&1 || need_apt+=("${apt_pkg[$tool]}")
    done
    if ((${#need_apt[@]})); then
        echo "setup: installing ${need_apt[*]} from Debian" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt_get update -qq
        apt_get install -y -qq "${need_apt[@]}" >/dev/null
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
