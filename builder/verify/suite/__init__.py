"""The checks `trainimg verify` runs inside a container (pytest + testinfra). Run by
builder.verify.runner with `--trainimg-context FILE`; also runnable by hand:
`pytest builder/verify/suite --trainimg-context ctx.json -p no:cacheprovider`."""
