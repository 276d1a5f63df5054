#!/usr/bin/env bash
# Set up everything trainimg needs on a fresh Debian 12 machine (root, no GPU, no registry):
# podman and friends from Debian, and a virtual environment in .venv with the toolkit, its
# test tools and the CPU torch wheel. Safe to run again: it skips what is already there.
set -euo pipefail
cd "$(dirname "$0")/.."

# tool -> Debian package. docker.io gives dockerd (the tests start a private Docker Engine),
# docker-registry a local registry for push/pin tests, apache2-utils htpasswd, openssl a CA;
# dnf, rpmbuild, createrepo_c (packages dnf, rpm, createrepo-c) and gpg (gnupg, which rpmsign
# signs with): tests/el9's rehearsal builds signed stand-in RPMs and installs them with dnf 4.14 /
# libdnf 0.69, the versions EL9 ships.
declare -A apt_pkg=([podman]=podman [buildah]=buildah [runc]=runc [debootstrap]=debootstrap
    [/usr/sbin/dockerd]=docker.io [docker-registry]=docker-registry [htpasswd]=apache2-utils
    [openssl]=openssl [dnf]=dnf [rpmbuild]=rpm [createrepo_c]=createrepo-c [gpg]=gnupg)
need_apt=()
for tool in "${!apt_pkg[@]}"; do
    command -v "$tool" >/dev/null 2>&1 || need_apt+=("${apt_pkg[$tool]}")
done
if ((${#need_apt[@]})); then
    echo "setup: installing ${need_apt[*]} from Debian" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# torch 2.13.0 is the CPU wheel that lies in /opt/wheels on these machines (pip finds it there);
# pinning it keeps pip from pulling a multi-GB CUDA build.
.venv/bin/pip install -q --disable-pip-version-check torch==2.13.0
.venv/bin/pip install -q --disable-pip-version-check -e '.[trainer,dev]'
echo "setup: ready (.venv)" >&2
