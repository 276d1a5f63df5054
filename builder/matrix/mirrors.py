"""Mirrors: where a site's builds fetch OS and CUDA packages instead of the public repositories.

matrix.yaml's optional `mirrors:` and a `trainimg build --mirrors FILE` share one schema:

    mirrors:
      oses:
        rocky9:                    # an oses key of an EL9 family OS
          repos:                   # repository id -> baseurl; ids the devel install enables
            baseos: https://mirror.example.com/rocky/9.6/BaseOS/x86_64/os   # (crb) stay
            appstream: https://mirror.example.com/rocky/9.6/AppStream/x86_64/os  # disabled
            crb: https://mirror.example.com/rocky/9.6/CRB/x86_64/os
          gpgkey: file:///etc/pki/rpm-gpg/RPM-GPG-KEY-Rocky-9   # or http(s)://...
          gpgkey_sha256: <hex>
          ca: http://mirror.example.com/pub/ca.crt     # optional, for https baseurls
          ca_sha256: <hex>
      cuda:
        el9:                       # NVIDIA's repository for the OS family
          repo: https://mirror.example.com/nvidia/cuda/rhel9/x86_64
          gpgkey: https://mirror.example.com/nvidia/cuda/rhel9/x86_64/D42D0685.pub
          gpgkey_sha256: <hex>     # optional: NVIDIA's key, the matrix's checksum
          ca: ...                  # optional, as above

Applying them is pure: the OS specs and CUDA repositories of the matrix get the mirror, and
every cell's cell hash covers it. The templates keep gpgcheck=1 either way.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from builder.matrix import model as m
from builder.matrix import validate as v
from builder.matrix.reader import Reader, redact_urls
from builder.matrix.yamlnodes import keypath_join, load, read_text

TOP = "mirrors"


def _url(r: Reader, value: Any, kp: str, pattern: v.Pattern) -> str:
    """A mirror URL; one with credentials is refused first, without showing them: written into
    a .repo file or a RUN line, they would stay in the image and its history."""
    if isinstance(value, str) and redact_urls(value) != value:
        r.fail(
            kp,
            f"{redact_urls(value)!r} carries credentials (user:password@ or a token): they would "
            "be written into the image's .repo file and its history; give the URL without them",
        )
    return r.text(value, kp, pattern)


def _ca(r: Reader, d: dict[str, Any], kp: str) -> tuple[str | None, str | None]:
    if ("ca" in d) != ("ca_sha256" in d):
        r.fail(kp, "give ca and ca_sha256 together (the certificate is checked by its sha256)")
    if "ca" not in d:
        return None, None
    return _url(r, d["ca"], f"{kp}.ca", v.KEY_URL), r.text(
        d["ca_sha256"], f"{kp}.ca_sha256", v.SHA256
    )


def _os_mirror(r: Reader, value: Any, kp: str) -> m.RepoMirror:
    d = r.mapping(value, kp, ("repos", "gpgkey", "gpgkey_sha256"), ("ca", "ca_sha256"))
    repos: dict[str, str] = {}
    for repo_id, url in r.mapping(d["repos"], f"{kp}.repos", open_keys=True).items():
        rkp = keypath_join(f"{kp}.repos", repo_id)
        repos[r.text(repo_id, rkp, v.KEY)] = _url(r, url, rkp, v.MIRROR_URL)
    if not repos:
        r.fail(f"{kp}.repos", "a mirror needs at least one repository (id: baseurl)")
    ca, ca_sha256 = _ca(r, d, kp)
    return m.RepoMirror(
        repos=repos,
        gpgkey=_url(r, d["gpgkey"], f"{kp}.gpgkey", v.KEY_URL),
        gpgkey_sha256=r.text(d["gpgkey_sha256"], f"{kp}.gpgkey_sha256", v.SHA256),
        ca=ca,
        ca_sha256=ca_sha256,
    )


def _cuda_mirror(r: Reader, value: Any, kp: str) -> m.CudaMirror:
    d = r.mapping(value, kp, ("repo", "gpgkey"), ("gpgkey_sha256", "ca", "ca_sha256"))
    repo = _url(r, d["repo"], f"{kp}.repo", v.MIRROR_URL)
    if repo.endswith(".repo"):
        r.fail(f"{kp}.repo", f"{repo!r} is a .repo file: give the repository's base URL")
    ca, ca_sha256 = _ca(r, d, kp)
    sha = d.get("gpgkey_sha256")
    return m.CudaMirror(
        repo=repo,
        gpgkey=_url(r, d["gpgkey"], f"{kp}.gpgkey", v.KEY_URL),
        gpgkey_sha256=None if sha is None else r.text(sha, f"{kp}.gpgkey_sha256", v.SHA256),
        ca=ca,
        ca_sha256=ca_sha256,
    )


def read_mirrors(r: Reader, value: Any, kp: str = TOP) -> m.Mirrors:
    """The `mirrors:` mapping, every value checked against its pattern."""
    if value is None:
        return m.Mirrors()
    d = r.mapping(value, kp, (), ("oses", "cuda"))
    oses = {
        r.text(key, keypath_join(f"{kp}.oses", key), v.KEY): _os_mirror(
            r, spec, keypath_join(f"{kp}.oses", key)
        )
        for key, spec in r.mapping(d.get("oses", {}), f"{kp}.oses", open_keys=True).items()
    }
    cuda = {
        r.text(fam, keypath_join(f"{kp}.cuda", fam), v.KEY): _cuda_mirror(
            r, spec, keypath_join(f"{kp}.cuda", fam)
        )
        for fam, spec in r.mapping(d.get("cuda", {}), f"{kp}.cuda", open_keys=True).items()
    }
    return m.Mirrors(oses, cuda)


def apply_mirrors(matrix: m.Matrix, mirrors: m.Mirrors, r: Reader) -> m.Matrix:
    """`matrix` with `mirrors` laid over its OS specs and CUDA repositories (later wins per
    OS key and family). Refuses (through `r`) a mirror for an unknown OS, for an OS whose
    builds install no packages, or without a repository the devel install enables."""
    oses = dict(matrix.oses)
    for key, mirror in mirrors.oses.items():
        kp = keypath_join(f"{TOP}.oses", key)
        spec = oses.get(key)
        if spec is None:
            r.fail(kp, f"no OS {key!r} in {matrix.path} (oses: {', '.join(oses)})")
        if not spec.distro.is_el:
            r.fail(
                kp,
                f"{key} is a {spec.family} OS whose base already holds every package its "
                "cells need (its builds install none): only EL (EL9, EL10) OSes take a mirror",
            )
        missing = [repo for repo in spec.devel_repos if repo not in mirror.repos]
        if missing:
            r.fail(
                f"{kp}.repos",
                f"oses.{key}.devel_repos enables {', '.join(missing)} for the devel install: "
                "the mirror must serve it too (add it to repos)",
            )
        oses[key] = dataclasses.replace(spec, mirror=mirror)
    cudas = dict(matrix.cuda)
    for family, cmirror in mirrors.cuda.items():
        kp = keypath_join(f"{TOP}.cuda", family)
        found = [k for k, c in cudas.items() if family in c.repos]
        if not found:
            r.fail(kp, f"no cuda release in {matrix.path} has a {family!r} repository")
        for key in found:
            repo = cudas[key].repos[family]
            mirrored = dataclasses.replace(
                repo,
                repo=cmirror.repo,
                gpgkey=cmirror.gpgkey,
                gpgkey_sha256=cmirror.gpgkey_sha256 or repo.gpgkey_sha256,
                ca=cmirror.ca,
                ca_sha256=cmirror.ca_sha256,
            )
            repos = {**cudas[key].repos, family: mirrored}
            cudas[key] = dataclasses.replace(cudas[key], repos=repos)
    merged = m.Mirrors(
        {**matrix.mirrors.oses, **mirrors.oses}, {**matrix.mirrors.cuda, **mirrors.cuda}
    )
    return dataclasses.replace(matrix, oses=oses, cuda=cudas, mirrors=merged)


def with_mirrors_file(matrix: m.Matrix, path: Path) -> m.Matrix:
    """`matrix` with the mirrors of a `--mirrors FILE` (a YAML file whose one top-level key is
    `mirrors:`) laid over its own; every error names the file, line and key."""
    tree, lines = load(read_text(path, "a mirrors file"), str(path))
    r = Reader(str(path), lines)
    top = r.mapping(tree, "", (TOP,))
    return apply_mirrors(matrix, read_mirrors(r, top[TOP]), r)
