"""`trainimg extend`: a child image FROM a built cell's image, with extra wheels that cannot
replace anything the parent locked, proven to carry the parent's stack unchanged (docs/build.md).

requirements.py judges the user's requirements against the parent's lock (pure); wheels.py
fetches the extras into a hash-locked wheelhouse of their own; containerfile.py renders the
child's Containerfile (pure); fingerprint.py reads and compares what must not change; plan.py
decides everything before a build and build.py carries it out.
"""
