"""``bench report``: the results folder as one offline web page (bench/report/page/)."""

from __future__ import annotations

from pathlib import Path

from ..errors import UserError


def cmd_report(args, registry) -> int:
    from ..parsing import parse_names, reference_out
    from ..records import ensure_writable
    from ..report.page import build_report

    out = Path(args.out or reference_out())
    dest = Path(args.to) if args.to else out / "report.html"
    if dest.exists() and dest.is_dir():
        raise UserError(f"--to {str(dest)!r} is a folder; give the HTML file to write, e.g. --to {dest / 'report.html'}")
    ensure_writable(dest.parent, "--to" if args.to else "--out")
    tables = parse_names(args.tables, "tables") if args.tables else None
    built = build_report(out, dest, registry, tables)
    print(
        f"wrote {built['path']} ({built['bytes'] / 1e6:.1f} MB: {built['tables']} tables, {built['records']} records, "
        f"{built['families']} families, {built['cost_rows']} cost rows; {built['seconds']:.0f} s); open it in a browser, offline"
    )
    return 0
