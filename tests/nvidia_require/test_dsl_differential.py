"""builder.nvidia_require against an independent reference: libnvidia-container's `src/cli/dsl.c`
and the rule functions of `src/cli/configure.c`, transcribed below statement by statement in
their C style (strsep, strcspn/strspn, strncmp, strtoumax, a 128-byte snprintf buffer).

The reference is written from the C source (NVIDIA/libnvidia-container, read through the
project's search tool), not from builder.nvidia_require, and deliberately keeps the C structure:
pointer walks over the string, a `ret` carried across terms. Generated predicates mix NVIDIA's
real terms with every edge the grammar has; both evaluators must agree on every one.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest
from packaging.version import Version

from builder.facts.driver_version import DriverVersion
from builder.nvidia_require.admission import DriverFacts, VisibleGpu, evaluate
from builder.nvidia_require.syntax import parse_require
from tests.quick_mode import examples

UINTMAX_MAX = 2**64 - 1
EXPR_MAX = 128
EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL = range(6)
OPERATORS = [
    ("=", EQUAL),
    ("!=", NOT_EQUAL),
    ("<", LESS),
    ("<=", LESS_EQUAL),
    (">", GREATER),
    (">=", GREATER_EQUAL),
]


# --- libc, as far as dsl.c uses it ------------------------------------------------------------
def strspn(s: str, accept: str) -> int:
    n = 0
    while n < len(s) and s[n] in accept:
        n += 1
    return n


def strcspn(s: str, reject: str) -> int:
    n = 0
    while n < len(s) and s[n] not in reject:
        n += 1
    return n


def strncmp(a: str, b: str, n: int) -> int:
    for i in range(n):
        ca = a[i] if i < len(a) else "\0"
        cb = b[i] if i < len(b) else "\0"
        if ca != cb:
            return ord(ca) - ord(cb)
        if ca == "\0":
            return 0
    return 0


def strtoumax(s: str) -> tuple[int, int]:
    """(value, index of the first unparsed character); index 0 when nothing was parsed."""
    i = 0
    while i < len(s) and s[i].isdigit():
        i += 1
    if i == 0:
        return 0, 0
    value = int(s[:i])
    return (UINTMAX_MAX if value > UINTMAX_MAX else value), i


def strsep(s: str | None, delim: str) -> tuple[str | None, str | None]:
    """(token, rest): rest is None once the string is used up."""
    if s is None:
        return None, None
    i = strcspn(s, delim)
    if i == len(s):
        return s, None
    return s[:i], s[i + 1 :]


def str_case_equal(a: str, b: str) -> bool:
    return a.lower() == b.lower()


# --- dsl.c -----------------------------------------------------------------------------------
def dsl_compare_version(v1: str, cmp: int, v2: str) -> int:
    if strspn(v1, "0123456789.") != len(v1):
        return -1
    if strspn(v2, "0123456789.") != len(v2):
        return -1
    while v1 != "" and v2 != "":
        n1, p1 = strtoumax(v1)
        if n1 == UINTMAX_MAX or p1 == 0:
            return -1
        n2, p2 = strtoumax(v2)
        if n2 == UINTMAX_MAX or p2 == 0:
            return -1
        if n1 != n2:
            if cmp == EQUAL:
                return 0
            if cmp == NOT_EQUAL:
                return 1
            if cmp in (LESS, LESS_EQUAL):
                return int(n1 < n2)
            if cmp in (GREATER, GREATER_EQUAL):
                return int(n1 > n2)
        v1 = v1[p1:]
        v1 = v1[strspn(v1, ".") :]
        v2 = v2[p2:]
        v2 = v2[strspn(v2, ".") :]
    v1 = v1[strspn(v1, ".0") :]
    v2 = v2[strspn(v2, ".0") :]
    if cmp == NOT_EQUAL:
        return int(v1 != "" or v2 != "")
    if cmp in (EQUAL, LESS_EQUAL, GREATER_EQUAL):
        if v1 == "" and v2 == "":
            return 1
        if cmp == EQUAL:
            return 0
    if cmp in (LESS, LESS_EQUAL):
        return int(v1 == "" and v2 != "")
    if cmp in (GREATER, GREATER_EQUAL):
        return int(v1 != "" and v2 == "")
    return -1


def dsl_compare_string(s1: str, cmp: int, s2: str) -> int:
    if cmp == EQUAL:
        return int(str_case_equal(s1, s2))
    if cmp == NOT_EQUAL:
        return int(not str_case_equal(s1, s2))
    return -1


@dataclass(frozen=True)
class Drv:
    nvrm_version: str | None
    cuda_version: str | None


@dataclass(frozen=True)
class Dev:
    arch: str
    brand: str | None


# configure.c's rules
def check_cuda_version(drv: Drv | None, dev: Dev | None, cmp: int, version: str) -> int:
    if drv is None or drv.cuda_version is None:
        return 1
    return dsl_compare_version(drv.cuda_version, cmp, version)


def check_driver_version(drv: Drv | None, dev: Dev | None, cmp: int, version: str) -> int:
    if drv is None or drv.nvrm_version is None:
        return 1
    return dsl_compare_version(drv.nvrm_version, cmp, version)


def check_device_arch(drv: Drv | None, dev: Dev | None, cmp: int, arch: str) -> int:
    if dev is None:
        return 1
    return dsl_compare_version(dev.arch, cmp, arch)


def check_device_brand(drv: Drv | None, dev: Dev | None, cmp: int, brand: str) -> int:
    if dev is None or dev.brand is None:
        return 1
    return dsl_compare_string(dev.brand, cmp, brand)


RULES = [
    ("cuda", check_cuda_version),
    ("driver", check_driver_version),
    ("arch", check_device_arch),
    ("brand", check_device_brand),
]


def evaluate_rule(expr: str, drv: Drv | None, dev: Dev | None) -> int:
    n = strcspn(expr, "<>=!")
    if n == 0:
        return -1
    ptr = expr[n:]
    m = strspn(ptr, "<>=!")
    if m == 0:
        return -1
    op = None
    for text, cmp in OPERATORS:
        if strncmp(ptr, text, m) == 0:
            op = (text, cmp)
            break
    if op is None:
        return -1
    key, val = expr[:n], ptr[m:]
    if val == "":
        return -1
    for name, func in RULES:
        if str_case_equal(key, name):
            ret = func(drv, dev, op[1], val)
            if ret == 0 and len(f"{key} {op[0]} {val}") >= EXPR_MAX:
                return -1
            return ret
    return -1


def dsl_evaluate(predicate: str, drv: Drv | None, dev: Dev | None) -> str:
    ret = 1
    ptr: str | None = predicate
    while True:
        or_expr, ptr = strsep(ptr, " ")
        if or_expr is None:
            break
        if or_expr == "":
            continue
        rest: str | None = or_expr
        and_expr: str | None = None
        while True:
            and_expr, rest = strsep(rest, ",")
            if and_expr is None:
                break
            if and_expr == "":
                continue
            ret = evaluate_rule(and_expr, drv, dev)
            if ret < 0:
                return "invalid"
            if not ret:
                break
        if and_expr is None:
            break
    return "ok" if ret else "unsatisfied"


# --- generated cases -------------------------------------------------------------------------
KEYS = ["cuda", "driver", "arch", "brand", "CUDA", "Brand", "DRIVER", "foo", "", "cuda ", "\tcuda"]
OPS = ["=", "!=", "<", "<=", ">", ">=", "!", "==", "=<", "<>", "!!", ">==", "=!", "<<"]
VERSIONS = [
    "12.8", "12.7", "13.1", "13.2", "11.6", "12", "12.8.0", "12.8.1", "12..8", ".5", ".", "12.8.",
    "0", "00.0", "570", "570.124.06", "570.124.6", "570.124.10", "565.57.01", "471", "595.71.05",
    "9.0", "10.0", "8.9", "12.1", "1.0.0.0", "18446744073709551615", "18446744073709551614",
    "18446744073709551616", "99999999999999999999999", "12.99999999999999999999", "12.8a",
    "r570", "12.8\tbrand=tesla", "12.8\n", "", "1e3", "0x10", "+12", "-1", "12.08", "12.80",
]  # fmt: skip
BRANDS = ["tesla", "TESLA", "unknown", "geforce", "nvidia", "quadro", "Quadro RTX", "", "x" * 130]
NVIDIA_TERMS = [
    "cuda>=12.8", "brand=unknown,driver>=470,driver<471", "brand=tesla,driver>=535,driver<536",
    "brand=nvidia,driver>=550,driver<551", "brand=quadrortx,driver>=565,driver<566",
]  # fmt: skip


def condition(rnd: random.Random) -> str:
    roll = rnd.random()
    if roll < 0.05:
        return rnd.choice(["", "cuda", ">=12.8", "cuda>=", "=", "brand", ",", "!"])
    key = rnd.choice(KEYS)
    op = rnd.choice(OPS[:6] if rnd.random() < 0.7 else OPS)
    if key.strip().lower() == "brand" and rnd.random() < 0.8:
        value = rnd.choice(BRANDS)
    else:
        value = rnd.choice(VERSIONS if rnd.random() < 0.9 else BRANDS)
    return f"{key}{op}{value}"


def predicate(rnd: random.Random) -> str:
    terms = []
    for _ in range(rnd.randint(0, 4)):
        if rnd.random() < 0.25:
            terms.append(rnd.choice(NVIDIA_TERMS))
            continue
        conds = [condition(rnd) for _ in range(rnd.randint(0, 3))]
        terms.append(rnd.choice([",", ",,"]).join(conds) + rnd.choice(["", "", ","]))
    seps = [" ", " ", " ", "  ", "\t", "\n"]
    text = ""
    for i, t in enumerate(terms):
        text += (rnd.choice(seps) if i else rnd.choice(["", "", " "])) + t
    return text + rnd.choice(["", "", " "])


HOST_DRIVERS = ["570.124.06", "565.57.01", "550.144.03", "535.230.02", "580.65.06", "595.71.05"]
HOST_CUDAS = ["12.8", "12.7", "12.4", "12.2", "13.0", "13.2"]
HOST_DEVICES = [("9.0", "unknown"), ("8.9", "geforce"), ("7.0", "Tesla"), ("10.0", "nvidia")]


def ours(text: str, driver: str, cuda: str, dev: tuple[str, str] | None) -> str:
    gpus = (VisibleGpu(dev[0], dev[1]),) if dev else ()
    verdict = evaluate(parse_require(text), DriverFacts(DriverVersion(driver), Version(cuda), gpus))
    if verdict.invalid is not None:
        return "invalid"
    return "ok" if verdict.satisfied else "unsatisfied"


CASES = examples(full=12_000, quick=1_500)  # the quick run samples fewer (tests/quick_mode.py)


def test_generated_predicates_agree_with_the_dsl_c_transcription() -> None:
    rnd = random.Random(20261201)
    outcomes: dict[str, int] = {"ok": 0, "unsatisfied": 0, "invalid": 0}
    disagreements = []
    for _ in range(CASES):
        text = predicate(rnd)
        i = rnd.randrange(len(HOST_DRIVERS))
        driver, cuda = HOST_DRIVERS[i], HOST_CUDAS[i]
        dev = rnd.choice([*HOST_DEVICES, None])
        want = dsl_evaluate(text, Drv(driver, cuda), Dev(*dev) if dev else None)
        got = ours(text, driver, cuda, dev)
        outcomes[want] += 1
        if got != want:
            disagreements.append((text, driver, dev, want, got))
    assert disagreements == [], disagreements[:10]
    # the generator reaches every outcome in earnest
    assert min(outcomes.values()) > CASES // 10, outcomes


@pytest.mark.parametrize(
    ("text", "dev", "want"),
    [
        ("cuda>=12.8 foo=1", None, "ok"),  # lazy: the typo behind a satisfied term never runs
        ("cuda>=13.0 foo=1", None, "invalid"),  # ... and is an error once it is reached
        ("cuda!12.8", None, "unsatisfied"),  # "!" is "!=" (strncmp over the run's length)
        ("cuda!13.0", None, "ok"),
        ("cuda==12.8", None, "invalid"),
        ("cuda>=12.8\tbrand=tesla", None, "invalid"),  # a tab is not a separator
        ("cuda>=.5", None, "invalid"),
        ("cuda>=.", None, "invalid"),
        ("cuda>=18446744073709551615", None, "invalid"),  # 2^64-1 is strtoumax's overflow value
        ("cuda<13.99999999999999999999", None, "ok"),  # components after a difference: unread
        ("cuda>=12..8", None, "ok"),
        ("", None, "ok"),  # an empty requirement holds
        ("cuda>=13.0 ,", None, "unsatisfied"),  # an empty term keeps the previous answer
        (", cuda>=13.0", None, "ok"),  # ... which is "true" before any condition
        ("brand<tesla", None, "ok"),  # no device: brand holds without looking at the operator
        ("brand<tesla", ("9.0", "unknown"), "invalid"),
        ("arch>=abc", None, "ok"),  # no device: arch holds without looking at the value
        ("brand=" + "x" * 130, ("9.0", "unknown"), "invalid"),  # the message buffer overflows
    ],
)
def test_the_grammar_edges_of_issue_12(text: str, dev: tuple[str, str] | None, want: str) -> None:
    assert dsl_evaluate(text, Drv("570.124.06", "12.8"), Dev(*dev) if dev else None) == want
    assert ours(text, "570.124.06", "12.8", dev) == want
