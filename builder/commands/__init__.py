"""One module per `trainimg` subcommand: each registers its parser and a `run(args) -> int`."""
