"""`trainimg run` and `trainimg slurm`: compose how the bundled trainer is started on a host
(pure: request.py, plan.py, cli_line.py, gpucheck.py, slurm.py) and start it through the SDKs
(hostfacts.py reads this host, execute.py runs the plan). docs/run.md."""
