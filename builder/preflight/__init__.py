"""Host preflight before an NVIDIA driver change (`trainimg preflight`).

Layout, effects at the edge only:
  allowlist  the read-only command shapes; every probe passes here first
  hostio     a testinfra Host behind the allow-list (local, ssh, podman, ansible)
  gather     runs the probes, parses their output into HostState (the only module that reads)
  parsers    one pure parser per recorded output
  checks     HostState + plan -> one Check per id (pure)
  images     matrix cells, images/lock.json, local images -> ImageRecord
  impact     every image on the current and the target driver (pure)
  inventory  ansible inventories -> host specs
  fleet      one host or many, in parallel; a bad host becomes a finding
  report     text, JSON, exit codes
"""
