"""One module per `trainimg` subcommand, NAME_cmd.py: each registers its parser and a
`run(args) -> int`; builder/cli.py lists them (COMMANDS) and imports one only when it runs."""
