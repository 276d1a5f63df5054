"""What an EL9 image really holds: `rpm -qa` of the built image, for its lock record.

The matrix pins EL9 OS packages to the version series EL guarantees and NVIDIA's exactly; the
lock keeps the build each one resolved to, so `trainimg matrix check` can say when a pin is no
longer what the repositories served at the last build.
"""

from __future__ import annotations

from builder.engines.base import EngineError, RunSpec
from builder.engines.roles import ContainerRunner
from builder.spec.labels import VERIFY_LABEL

QUERY = "%{NAME} %{EPOCHNUM}:%{VERSION}-%{RELEASE}.%{ARCH}\\n"


def parse_rpm_qa(text: str) -> dict[str, str]:
    """`rpm -qa --qf QUERY` output -> name -> EPOCH:VERSION-RELEASE.ARCH (gpg keys left out;
    a name installed twice, as kernels are, keeps its last line)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        name, _, evra = line.strip().partition(" ")
        if name and evra and name != "gpg-pubkey":
            out[name] = evra
    return dict(sorted(out.items()))


def rpm_packages(engine: ContainerRunner, image: str) -> dict[str, str]:
    """The image's installed RPMs (one short container, no network)."""
    result = engine.run(
        RunSpec(
            image,
            entrypoint=["rpm"],
            command=["-qa", "--qf", QUERY],
            network="none",
            labels={VERIFY_LABEL: "packages"},
        ),
        timeout=300,
    )
    if result.exit_code != 0:
        raise EngineError(f"rpm -qa in {image} failed ({result.exit_code}): {result.stderr[-400:]}")
    return parse_rpm_qa(result.stdout)
