"""`trainimg matrix list|explain|check`: the cells, the facts behind one, the rules over all."""

from __future__ import annotations

import argparse
from typing import Any

from builder.commands.columns import fit_table, output_width
from builder.commands.common import shared_options, workspace
from builder.commands.json_out import JsonKind, add_json_option, document, text_wanted, write_json
from builder.facts import torch_builds
from builder.judgement.finding import Finding
from builder.judgement.severity import BLOCK, WARN
from builder.matrix.model import Cell, Excluded
from builder.spec import labels as lab

# each subcommand's JSON: its kind and schema version (docs/json.md, docs/schemas/)
LIST_JSON = JsonKind("trainimg.matrix.list", 1)
EXPLAIN_JSON = JsonKind("trainimg.matrix.explain", 1)
CHECK_JSON = JsonKind("trainimg.matrix.check", 1)


def register(sub: Any) -> None:
    p = sub.add_parser("matrix")
    msub = p.add_subparsers(dest="matrix_command", required=True, metavar="{list,explain,check}")
    common = shared_options()
    ls = msub.add_parser(
        "list", parents=[common], help="a table of the matrix's cells (the rules: `matrix check`)"
    )
    add_json_option(ls, LIST_JSON)
    ls.add_argument("--all", action="store_true", help="also list excluded cells and why")
    ls.set_defaults(func=run_list)
    ex = msub.add_parser(
        "explain", parents=[common], help="every fact that admits or excludes one cell"
    )
    ex.add_argument("cell", help="a cell name (see `trainimg matrix list --all`)")
    add_json_option(ex, EXPLAIN_JSON)
    ex.set_defaults(func=run_explain)
    ck = msub.add_parser("check", parents=[common], help="apply every rule to every cell")
    add_json_option(ck, CHECK_JSON)
    ck.add_argument("--strict", action="store_true", help="exit 1 on warnings too")
    ck.add_argument("--stale-minors", type=int, default=2, metavar="N",
                    help="warn when a CUDA line's newest torch is more than N minors behind "
                    "the newest release for it (default: 2)")  # fmt: skip
    ck.add_argument("--stale-days", type=int, default=90, metavar="D",
                    help="warn when a facts data file was read more than D days ago "
                    "(default: 90)")  # fmt: skip
    ck.set_defaults(func=run_check)


def cell_summary(cell: Cell) -> dict[str, Any]:
    return {
        "name": cell.name,
        "group": cell.group,
        **cell.axis_values(),
        "torch_build": str(cell.torch),
        "torchao": lab.torchao_version(cell),
        "base": cell.os.base_ref,
        "base_pinned": bool(cell.os.digest or cell.os.local),
        "arch_list": None if (a := lab.cell_arch_list(cell)) is None else list(a),
        "min_driver": lab.min_driver(cell),
        "gpus": [g.key for g in cell.gpus],
        "cell_hash": cell.cell_hash,
    }


def _table(rows: list[list[str]]) -> str:
    """The table within the terminal's width (builder/commands/columns.py): a name is never
    cut; the columns that do not fit beside it go to a line under it."""
    return "\n".join(fit_table(rows, output_width()))


def run_list(args: argparse.Namespace) -> int:
    # Listing judges nothing: the rules run in `matrix check`/`explain` and in every command
    # that renders or builds (their strict workspace refuses a blocked cell).
    ws = workspace(args, strict=False)
    if args.json is not None:
        out: dict[str, Any] = {"cells": [cell_summary(c) for c in ws.cells]}
        if args.all:
            out["excluded"] = [_excluded_json(e) for e in ws.expansion.excluded]
        write_json(args.json, document(LIST_JSON, out))
    if not text_wanted(args):
        return 0
    rows = [["CELL", "OS", "ACCEL", "DRIVER", "PY", "TORCH", "FP8", "FLAVOUR", "CELL HASH"]]
    for c in ws.cells:
        v = c.axis_values()
        rows.append(
            [
                c.name,
                c.os.key,
                str(c.torch).partition("+")[2] or "cpu",  # the build tag: cu128, cu130, cpu
                v["driver"] or "-",
                c.python,
                str(c.torch),
                c.fp8,
                c.flavour,
                c.cell_hash,
            ]
        )
    print(_table(rows))
    if args.all and ws.expansion.excluded:
        print()
        erows = [["EXCLUDED", "GROUP", "CODE", "REASON"]]
        erows += [[e.name, e.group, e.reason.code, e.reason.text] for e in ws.expansion.excluded]
        print(_table(erows))
    print(f"\n{len(ws.cells)} cells, {len(ws.expansion.excluded)} excluded")
    return 0


def _excluded_json(e: Excluded) -> dict[str, Any]:
    return {
        "name": e.name,
        "group": e.group,
        **e.values,
        "reason": {"code": e.reason.code, "message": e.reason.text},
    }


def _finding_json(f: Finding) -> dict[str, Any]:
    """A rule's finding: the paired {code, severity, message} every command's JSON uses (code:
    the stable reason code where the rule has one, else the rule's id), the rule (`check`)
    and the sources the fact rests on."""
    return {**f.paired_json(), "check": f.id, "sources": [str(s) for s in f.sources]}


def run_explain(args: argparse.Namespace) -> int:
    ws = workspace(args, strict=False)
    excluded = ws.expansion.find_excluded(args.cell)
    if excluded is not None:
        if args.json is not None:
            write_json(args.json, document(EXPLAIN_JSON, {"excluded": _excluded_json(excluded)}))
        if text_wanted(args):
            print(
                f"cell {excluded.name} is excluded by group {excluded.group}: "
                f"[{excluded.reason.code}] {excluded.reason.text}"
            )
            for k, val in excluded.values.items():
                print(f"  {k:<12} {val if val is not None else '-'}")
        return 0
    from builder.judgement.matrix import check_cell  # the rules: not paid by `matrix list`

    cell = ws.cell(args.cell)
    findings = check_cell(cell, ws.today)
    errors = [f for f in findings if f.severity is BLOCK]
    if args.json is not None:
        body = {"cell": cell_summary(cell), "findings": [_finding_json(f) for f in findings]}
        write_json(args.json, document(EXPLAIN_JSON, body))
    if text_wanted(args):
        _explain_text(cell, findings)
    return 0 if not errors else 2


def _explain_text(cell: Cell, findings: list[Finding]) -> None:
    s = cell_summary(cell)
    print(f"cell {cell.name}  (group {cell.group}, cell hash {cell.cell_hash})")
    for key in ("os", "accelerator", "driver", "cuda", "gcc", "python", "torch", "fp8", "flavour"):
        print(f"  {key:<12} {s[key] if s[key] is not None else '-'}")
    print(f"  {'base':<12} {s['base']}{'' if s['base_pinned'] else '  (not pinned by digest)'}")
    print("derived from the rules:")
    index = torch_builds.index_for(cell.torch.local or "cpu")
    print(f"  torch build    {cell.torch}  ({index})")
    if s["torchao"]:
        print(f"  torchao        {s['torchao']}")
    if cell.cuda is not None:
        print(f"  arch list      {lab.arch_list_text(lab.cell_arch_list(cell))}")
        print(f"  min driver     {s['min_driver']}")
        req = lab.require_cuda(cell) or ""
        print(f"  CUDA from      {lab.cuda_source(cell)}")
        print(
            f"  NVIDIA_REQUIRE_CUDA  {req.split()[0]} + {len(req.split()) - 1} brand/driver windows"
        )
    if cell.gpus:
        print(f"  target GPUs    {', '.join(g.name for g in cell.gpus)}")
    print("facts:")
    for f in findings:
        print(f"  {f.severity:<5} {f.id:<20} {f.message}")
        for src in f.sources:
            print(f"        {'':<20} source: {src}")


def run_check(args: argparse.Namespace) -> int:
    from builder.build import lock as lockfile  # the rules: not paid by `matrix list`
    from builder.judgement.matrix import StaleLimits, check_cell, check_cells, check_lock, violation

    ws = workspace(args, strict=False)
    problems: list[tuple[Cell, Finding]] = [
        (c, f) for c in ws.cells for f in check_cell(c, ws.today) if f.severity in (BLOCK, WARN)
    ]
    # and each cell against its last build (images/lock.json beside the matrix, when there)
    records = lockfile.read(ws.root / lockfile.DEFAULT_PATH)
    problems += [
        (c, f)
        for c in ws.cells
        if c.name in records
        for f in check_lock(c, records[c.name], ws.today)
        if f.severity in (BLOCK, WARN)
    ]
    problems += check_cells(ws.cells, ws.today, StaleLimits(args.stale_minors, args.stale_days))
    errors = [(c, f) for c, f in problems if f.severity is BLOCK]
    warnings = [(c, f) for c, f in problems if f.severity is WARN]
    if args.json is not None:
        body = {
            "cells": len(ws.cells),
            "errors": [
                {"cell": c.name, **_finding_json(f), "where": str(violation(ws.matrix, c, f))}
                for c, f in errors
            ],
            "warnings": [{"cell": c.name, **_finding_json(f)} for c, f in warnings],
        }
        write_json(args.json, document(CHECK_JSON, body))
    if text_wanted(args):
        for c, f in errors:
            print(f"error: {violation(ws.matrix, c, f)}")
        # a warning true of many cells is said once, with the cells it concerns
        grouped: dict[tuple[str, str], list[str]] = {}
        for c, f in warnings:
            grouped.setdefault((f.id, f.message), []).append(c.name)
        for (rule, message), names in grouped.items():
            who = names[0] if len(names) == 1 else f"{len(names)} cells"
            print(f"warning: [{rule}] {message} ({who})")
        print(f"{len(ws.cells)} cells checked: {len(errors)} errors, {len(warnings)} warnings")
    if errors:
        return 2
    return 1 if (args.strict and warnings) else 0
