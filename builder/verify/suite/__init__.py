"""The checks `trainimg verify` runs inside a container (pytest + testinfra). Run by
builder.verify.runner with `--trainimg-context FILE`; also runnable by hand:
`pytest builder/verify/suite --trainimg-context ctx.json -p no:cacheprovider`.

One module per concept, numbered: pytest runs the files of a directory in the order of their
names and a file's tests in the order they are written, and that order is the report's
(versions, GPU code, training, extensions, the image's configuration). Each test is registered
once as a verify check (`@check(name, "verify")`, name = the test's name without `test_`);
the runner imports the modules in the same order, so `trainimg verify --help`, docs/verify.md's
table and the run agree (tests/verify/test_report.py holds them to one another). A check that
cannot apply (no GPU on this host, a CPU cell) is SKIPPED with the reason; it never passes in
its place.

Three sources meet in the checks: the matrix cell (ctx["expect"], source "matrix"; or only the
labels when the cell is not in this matrix), the image's labels and configuration
(ctx["image"]), and the running container (the `host`).
"""
