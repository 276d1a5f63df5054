"""The host's proxy reaches a build's RUN steps through the engine API, credentials included,
and never its layers, history, labels, config, the lock or the log (engines/proxy.py).

The unit half reads the host's variables and `--proxy`; the engine half builds one small image
on the session's podman (the offline base; podman-py, and the docker SDK on its compat API)
with a secret planted in the proxy URL and greps everything the image and the build show."""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.cli import main
from builder.engines.base import BuildFailed, BuildRequest, RunSpec
from builder.engines.docker import DockerEngine
from builder.engines.podman import PodmanEngine
from builder.engines.proxy import Proxy, ProxyError, from_environment, redact
from builder.engines.sdk import SdkEngine
from tests.conftest import BASE_TAG

SECRET = "s3cr3t-Pa55"  # noqa: S105 - the planted secret the test greps for
URL = f"http://builder:{SECRET}@proxy.corp.example:3128"
TEST_LABEL = "io.trainimg.test"


def test_the_host_variables_and_the_flag_make_the_proxy() -> None:
    env = {"HTTPS_PROXY": URL, "no_proxy": "localhost,.corp.example,10.0.0.0/8"}
    proxy = from_environment(env)
    assert proxy.env == {"https_proxy": URL, "no_proxy": "localhost,.corp.example,10.0.0.0/8"}
    assert proxy.buildargs["HTTPS_PROXY"] == proxy.buildargs["https_proxy"] == URL
    flagged = from_environment(env, "http://other.example:8080")
    assert flagged.env["http_proxy"] == flagged.env["https_proxy"] == "http://other.example:8080"
    assert not from_environment({})


def test_a_proxy_never_shows_its_password() -> None:
    proxy = from_environment({}, URL)
    assert SECRET not in repr(proxy) and SECRET not in str(proxy)
    assert "builder:***@proxy.corp.example:3128" in repr(proxy)
    assert redact("https://tok3n@h.example/") == "https://***@h.example/"
    assert redact("http://h.example:1/") == "http://h.example:1/"
    # an engine's error may echo the request URL, percent-encoded
    encoded = urllib.parse.quote(json.dumps({"https_proxy": URL}))
    assert SECRET not in proxy.scrub(f"500 for url: /build?buildargs={encoded}")


@pytest.mark.parametrize(
    ("env", "flag", "where"),
    [
        ({"https_proxy": f"ftp://u:{SECRET}@h:1"}, None, "$https_proxy"),
        ({}, f"http://u:{SECRET}@h:notaport", "--proxy"),
        ({"HTTP_PROXY": f"proxy.corp:3128 u:{SECRET}"}, None, "$HTTP_PROXY"),
        ({"no_proxy": "a;rm -rf /"}, None, "$no_proxy"),
    ],
)
def test_a_bad_proxy_is_refused_naming_the_variable_not_the_password(
    env: dict[str, str], flag: str | None, where: str
) -> None:
    with pytest.raises(ProxyError) as exc:
        from_environment(env, flag)
    assert str(exc.value).startswith(where) and exc.value.exit_code == 2
    assert SECRET not in str(exc.value)


def test_build_refuses_a_proxy_as_a_build_arg(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["build", "--build-arg", f"https_proxy={URL}"])
    err = capsys.readouterr().err
    assert code == 2 and "--build-arg https_proxy: a proxy is not a build argument" in err
    assert "--proxy URL" in err and "Traceback" not in err


# --- the engine half: one small image on the session's podman ------------------------------

CONTAINERFILE = f"""\
FROM {BASE_TAG}
RUN test -n "$https_proxy" && test "$HTTP_PROXY" = "$http_proxy" && test -n "$no_proxy" \\
    && printf '%s' "$https_proxy" | sha256sum | cut -c1-64 > /proxy-seen \\
    && echo "the proxy reached RUN"
LABEL io.trainimg.test=proxy
"""


@pytest.fixture(scope="module", params=["podman", "docker"])
def engine(
    request: pytest.FixtureRequest, podman_service: str, offline_base: str
) -> Iterator[SdkEngine]:
    """podman-py on libpod's API, and the docker SDK on podman's Docker-compatible API."""
    e: SdkEngine = (
        PodmanEngine(podman_service) if request.param == "podman" else DockerEngine(podman_service)
    )
    try:
        yield e
    finally:
        e.close()


def test_the_proxy_reaches_run_and_nothing_the_image_keeps(
    engine: SdkEngine, tmp_path: Path
) -> None:
    (tmp_path / "Containerfile").write_text(CONTAINERFILE, encoding="utf-8")
    proxy = Proxy({"http_proxy": URL, "https_proxy": URL, "no_proxy": "localhost"})
    lines: list[str] = []
    result = engine.build(
        BuildRequest(tmp_path, network="none", nocache=True, proxy=proxy), on_log=lines.append
    )
    try:
        seen = engine.run(
            RunSpec(result.image_id, entrypoint=["cat", "/proxy-seen"], labels={TEST_LABEL: "p"})
        )
        info = engine.inspect_image(result.image_id)
        history = engine.history(result.image_id)
        raw = engine._client.images.get(result.image_id).attrs
        env = engine.run(
            RunSpec(result.image_id, entrypoint=["env"], labels={TEST_LABEL: "p"})
        ).stdout
        # every file of every layer (not /proc, /sys, /dev: the grep's own argument is there),
        # on one SDK: both build the same RUN into a layer, and the grep reads ~0.5 GB
        grep = 'grep -rlF -e "$1" / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev'
        files = engine.run(
            RunSpec(
                result.image_id,
                entrypoint=["sh", "-c", f"{grep}; echo rc=$?", "sh", SECRET]
                if isinstance(engine, PodmanEngine)
                else ["echo", "rc=1"],
                network="none",
                labels={TEST_LABEL: "p"},
            ),
            timeout=300,
        ).stdout
    finally:
        engine.remove_image(result.image_id)
    # it reached the RUN step, credentials included ...
    assert seen.stdout.strip() == hashlib.sha256(URL.encode()).hexdigest()
    assert "the proxy reached RUN" in "\n".join(lines)
    # ... and nothing the image or the build shows holds it
    assert files.strip().splitlines() == ["rc=1"], files  # grep found no file
    for where, text in {
        "log": "\n".join(lines),
        "history": "\n".join(history),
        "labels": json.dumps(info.labels),
        "inspect": json.dumps(raw),
        "env": env,
    }.items():
        assert SECRET not in text, where
        assert "proxy.corp.example" not in text, where


def test_a_failing_build_shows_no_secret(engine: SdkEngine, tmp_path: Path) -> None:
    """A RUN step that prints its proxy: the log and the error carry *** instead."""
    (tmp_path / "Containerfile").write_text(
        f'FROM {BASE_TAG}\nRUN echo "via $https_proxy" && exit 3\n', encoding="utf-8"
    )
    lines: list[str] = []
    with pytest.raises(BuildFailed) as failed:
        engine.build(
            BuildRequest(tmp_path, network="none", proxy=from_environment({}, URL)),
            on_log=lines.append,
        )
    shown = "\n".join([str(failed.value), *failed.value.log_tail, *lines])
    assert "via http://builder:***@proxy.corp.example:3128" in shown
    assert SECRET not in shown
