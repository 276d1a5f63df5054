"""Host preflight before an NVIDIA driver change (`trainimg preflight`).

Layout, effects at the edge only:
  allowlist   the read-only command shapes; every probe passes here first
  hostio      a testinfra Host behind the allow-list (local, ssh, podman, ansible)
  gather      runs the probes, parses their output into HostState (the only module that reads)
  host_state  HostState: what was read, parsed; host_gpus: NVML and lspci merged into HostGpus,
              each identified by PCI id first (builder.judgement.gpu_identity)
  (parsers)   one pure parser per recorded output, a module per source (nvidia-smi, kernel...),
              live below the wings in builder/host/parsers/: `trainimg run` and verify read
              this host with them too
  checks/     HostState + UpgradePlan -> one Finding per registered host check (pure), a module
              per domain; each check is `@check(id, "host", reads=...)` (builder.judgement)
  model       UpgradePlan: the target driver, its kernel-module flavour, --strict, --repos
  repos_probe --repos: the host's own dnf asked what installs the driver (after gather's steps);
              repos_route: which packages that is for a kernel (pure)
  images      matrix cells, images/lock.json, local images -> ImageRecord
  impact      every image on the current and the target driver (pure), `images.impact`: the
              one image x host judgement of builder.judgement.image, laid side by side
  compat      one image, one driver, one GPU without a host (`trainimg compat`)
  inventory   ansible inventories -> host specs; host_spec: --hosts values, validated alike
  fleet       one host or many, in parallel; a bad host becomes its `host.reach` finding
  record      --record/--from: what a host returned (what preflight parses of it), written and
              replayed; record_files: a record's files read as untrusted input (host data in
              a message: builder/host/shown.py)
  report      a host's now and plan verdicts, the fleet's text (a line per host), JSON, exit
              codes
"""
