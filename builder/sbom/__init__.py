"""The supply chain of an image from its lock record: a CycloneDX SBOM (cyclonedx.py), an
in-toto statement with a SLSA provenance predicate (provenance.py), what is read from inside
the image for them (inventory.py), and whether labels, SBOM and lock agree (agree.py).
"""
