"""One way to judge anything trainimg judges: a matrix cell, a host before a driver upgrade, an
image against a driver, a built image. Every judgement is a list of `Finding`s on one
`Severity` scale, made by checks registered once with `@check` (their ids, --help lists and
docs tables come from the registry)."""
