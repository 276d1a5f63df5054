"""Host preflight before an NVIDIA driver change (`trainimg preflight`).

Layout, effects at the edge only:
  allowlist   the read-only command shapes; every probe passes here first
  hostio      a testinfra Host behind the allow-list (local, ssh, podman, ansible)
  gather      runs the probes, parses their output into HostState (the only module that reads)
  host_state  HostState: what was read, parsed; host_gpus: NVML and lspci merged into HostGpus
  parsers/    one pure parser per recorded output, a module per source (nvidia-smi, kernel...)
  checks/     HostState + UpgradePlan -> one Finding per registered host check (pure), a module
              per domain; each check is `@check(id, "host", reads=...)` (builder.judgement)
  model       UpgradePlan: the target driver, its kernel-module flavour, --strict
  images      matrix cells, images/lock.json, local images -> ImageRecord
  impact      every image on the current and the target driver (pure), `images.impact`
  compat      one image, one driver, one GPU without a host (`trainimg compat`)
  inventory   ansible inventories -> host specs
  fleet       one host or many, in parallel; a bad host becomes its `host.reach` finding
  record      --record/--from: what a host returned, written and replayed
  report      text, JSON, exit codes
"""
