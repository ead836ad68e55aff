"""The report as one HTML file: every style and script inline, plots as inline SVG, nothing
fetched when it is opened. Views (one shown at a time, by the address's #anchor; all of them in
order without scripts): an overview, the tables, one page per family, the ``bench cost`` rows and
the records. Every number of a table links to its cell, every cell to the records it read, every
record to its config, seed, commit, the command that made it and the one that trains it again,
and its per-example outcomes open in the page (the bits bench.load_outcomes reads, drawn)."""

from __future__ import annotations

import json
import re
from html import escape

from ..cells import chance_text
from . import svg
from .assets import CSS, JS
from .collect import Report, TableView, family_of, finite

VERDICT_CLASS = {"holds": "holds", "does not hold": "fails", "inconclusive": "unsure", "measured": "unsure"}
#: a family's outcome in a claim: (side it is on, the claim's verdict) -> win | loss | tie
OUTCOME = {("better", "holds"): "win", ("better", "does not hold"): "loss", ("than", "holds"): "loss", ("than", "does not hold"): "win"}


def e(x) -> str:
    return escape(str(x), quote=True)


def num(v, digits: int = 1) -> str:
    """A number as the tables print it (— for none)."""
    if not finite(v):
        return "—" if v is None else e(v)
    if isinstance(v, int):
        return f"{v:,}"
    return f"{v:.{digits}f}"


def p_text(p) -> str:
    """A p-value as the claims print it (— for none)."""
    return "—" if not finite(p) else f"{p:.3f}" if p >= 0.001 else "&lt; 0.001"


def _digits(table: TableView) -> int:
    return 1 if table.unit == "%" else 2


def _ours(table: TableView, line: dict) -> str:
    """The cell's value as ``bench reproduce`` prints it: mean ± the 95% CI half-width (n seeds)."""
    if not line.get("n"):
        return "FAIL" if line.get("failed") else "—"
    d = _digits(table)
    text = num(line.get("ours"), d)
    if finite(line.get("ours_ci95")):
        text += f" ± {num(line['ours_ci95'], d)}"
    return text + f" ({line['n']})" + (" ~" if line.get("at_chance") else "") + (" †" if line.get("stale") else "")


def _paper(line: dict, d: int) -> str:
    if line.get("paper") is None:
        return "n/r"
    return num(line["paper"], d) + (f" ± {num(line['paper_std'], d)}" if finite(line.get("paper_std")) else "")


# ---- tables ---------------------------------------------------------------------------------


def _matrix(t: TableView) -> str:
    """Rows x columns: ours (a link to the cell), the paper's and Δ, as the Markdown table lays them out wide."""
    by = {(c.row, c.column): c for c in t.cells}
    labels = [label for label, _, _ in t.columns]
    paper = any(c.line.get("paper") is not None for c in t.cells)
    head = "".join(f'<th colspan="{3 if paper else 1}">{e(label)}</th>' for label in labels)
    sub = "".join("<th>ours</th><th>paper</th><th>Δ</th>" if paper else "<th>ours</th>" for _ in labels)
    body = []
    d = _digits(t)
    for row, model in t.row_labels:
        tds = []
        for label in labels:
            c = by.get((row, label))
            if c is None:
                tds.append("<td></td><td></td><td></td>" if paper else "<td></td>")
                continue
            cls = " chance" if c.line.get("at_chance") else ""
            learned = "".join(
                f'<span class="learned"> · {e(k)} {e(v)}</span>'
                for k, v in c.line.items()
                if k.startswith("learned") and v not in (None, "")
            )  # learned counts, where the cells carry them
            tds.append(
                f'<td class="num{cls}" data-cell="{c.id}" data-value="{c.line.get("ours")}"><a href="#{c.id}">'
                f"{e(_ours(t, c.line))}</a>{learned}</td>"
            )
            if paper:
                delta = c.line.get("delta")
                tds.append(
                    f'<td class="num paper">{e(_paper(c.line, d))}</td><td class="num">{"—" if delta is None else f"{delta:+.1f}"}</td>'
                )
        body.append(f'<tr><th><a href="#fam-{e(family_of(model))}">{e(row)}</a></th>{"".join(tds)}</tr>')
    body += _chance_row(t, labels, paper)
    sub_row = f"<tr><th></th>{sub}</tr>" if paper else ""
    return (
        f'<div class="scroll"><table class="matrix"><thead><tr><th>row</th>{head}</tr>{sub_row}</thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _chance_row(t: TableView, labels: list[str], paper: bool) -> list[str]:
    """The row under the table's rows: per column the chance level (the best trivial strategy's
    score, the cells' ``chance_level``) and the strategy that sets it; none when no cell has one."""
    levels: dict[str, list] = {}
    for c in t.cells:
        if finite(c.line.get("chance_level")):
            levels.setdefault(c.column, []).append((c.line["chance_level"], c.line.get("chance_strategy") or ""))
    if not levels:
        return []
    d = _digits(t)
    tds = []
    for label in labels:
        found = levels.get(label)
        text = chance_text(found, d) if found else "—"
        tds.append(f'<td class="num chance">{e(text)}</td>' + ("<td></td><td></td>" if paper else ""))
    return [f"<tr><th>chance (trivial strategy)</th>{''.join(tds)}</tr>"]


def _cell_lines(t: TableView) -> str:
    """Every cell with every key its line carries (the CSV's columns, learned counts and whatever
    else the kind computes), and links to the records it read."""
    if not t.cells:
        return ""
    keys = list(dict.fromkeys(k for c in t.cells for k in c.line))
    head = "".join(f"<th>{e(k)}</th>" for k in keys) + "<th>records</th>"
    body = []
    for c in t.cells:
        tds = "".join(
            f'<td class="num">{num(c.line.get(k), 3)}</td>'
            if finite(c.line.get(k))
            else f"<td>{e('' if c.line.get(k) is None else c.line.get(k))}</td>"
            for k in keys
        )
        recs = " ".join(f'<a href="#{r}">{r}</a>' for r in c.records)
        if not recs and t.kind == "cost":
            recs = f'<a href="#{t.stem}-measured">measurement</a>'
        body.append(f'<tr id="{c.id}">{tds}<td>{recs}</td></tr>')
    return (
        f'<details class="cells"><summary>every cell: all its numbers and the records it read ({len(t.cells)} cells)'
        f'</summary><div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
        f"</div></details>"
    )


def _claims(t: TableView, index: int) -> str:
    if not t.claims:
        return ""
    d = _digits(t)
    rows = []
    for i, cl in enumerate(t.claims):
        line = cl.line
        verdict = line.get("ours", "")
        ci = (
            f"[{num(line.get('ci_low'), d)}, {num(line.get('ci_high'), d)}]"
            if finite(line.get("ci_low")) and finite(line.get("ci_high"))
            else "—"
        )
        cells = "<br>".join(
            f'<a href="#{q.better}">{e(q.better_label)}</a> vs <a href="#{q.than}">{e(q.than_label)}</a>: '
            f'<span class="v {VERDICT_CLASS.get(q.verdict, "unsure")}">{e(q.verdict)}</span>'
            for q in cl.pairs
            if q.better and q.than
        )
        prov = f' <span class="prov">provisional: {e(line["provisional"])}</span>' if line.get("provisional") else ""
        rows.append(
            f'<tr id="{t.stem}-k{i}"><td>{e(line.get("claim", ""))}<div class="why">{e(line.get("why", ""))}</div></td>'
            f'<td>{e(line.get("source", ""))}</td><td class="v {VERDICT_CLASS.get(verdict, "unsure")}">{e(verdict)}{prov}</td>'
            f'<td class="num" data-effect="{line.get("effect")}">{num(line.get("effect"), d)}</td><td class="num">{ci}</td>'
            f'<td class="num">{p_text(line.get("p"))}</td><td>{e(line.get("n", ""))}</td><td>{e(line.get("test", ""))}</td>'
            f'<td class="v {VERDICT_CLASS.get(line.get("paper", ""), "unsure")}">{e(line.get("paper", ""))}'
            f'<div class="why">{e(line.get("paper_why", ""))}</div></td><td class="links">{cells}</td></tr>'
        )
    return (
        f'<h4>Claims</h4><p class="rule">{e(t.rule)}</p><div class="scroll"><table class="claims"><thead><tr><th>claim</th>'
        f"<th>source</th><th>ours</th><th>effect</th><th>90% CI</th><th>p</th><th>n</th><th>test</th><th>paper</th>"
        f"<th>cells</th></tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    )


def _generic(t: TableView) -> str:
    """A table without cells (checks): its printed rows."""
    head = "".join(f"<th>{e(h)}</th>" for h in t.headers)
    body = "".join("<tr>" + "".join(f"<td>{e(v)}</td>" for v in row) + "</tr>" for row in t.rows)
    return f'<div class="scroll"><table class="printed"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _colours(report: Report) -> dict[str, str]:
    return {f: svg.colour(i) for i, f in enumerate(report.families)}


def _curves(t: TableView, colours: dict) -> list[str]:
    plots = []
    row_model = dict(t.row_labels)
    for task, by in t.curves.items():
        series, seen = [], {}
        for label, line in by.items():
            if label.startswith("_"):
                continue
            fam = family_of(row_model.get(label, label))
            n = seen[fam] = seen.get(fam, -1) + 1
            col = colours.get(fam, "#333") if n == 0 else svg.colour(len(colours) + len(series))
            series.append((label, col, line["x"], line["y"]))
        chance = by["_chance"]
        xs = sorted(chance)
        ident = f"{t.stem}-curve-{task}"
        caption = (
            f"{task}: {by['_metric']} per length bin, pooled over the splits {', '.join(by['_splits'])} and each cell's "
            f"seeds (weighted by the bin's examples; x = the bin's first length); "
            + (
                "dashed: the chance level (the records' majority share per bin, else the split's)"
                if xs
                else "the records carry no chance level for this metric (none drawn)"
            )
        )
        chart = svg.line_chart(
            ident, caption, series, "sequence length (bin start)", f"{by['_metric']} (%)", (xs, [chance[x] for x in xs]) if xs else None
        )
        plots.append(f"<figure>{chart}<figcaption>{e(caption)}</figcaption></figure>")
    return plots


def _cost_for(report: Report, task: str, model: str) -> dict | None:
    """The newest ``bench cost`` training row of ``model`` (else its family) on ``task``."""
    rows = [
        r
        for r in report.cost_rows
        if r["_task"] == task and r.get("step_s") is not None and str(r.get("_measurement", "")).startswith("train")
    ]
    return next((r for r in rows if r["model"] == model), None) or next(
        (r for r in rows if family_of(r["model"]) == family_of(model)), None
    )


def _scatters(t: TableView, report: Report, colours: dict) -> list[str]:
    """Per task: each row's cell on the task's first column against its state bytes and its measured step time."""
    if t.kind != "results":
        return []
    plots = []
    for task in dict.fromkeys(task for _, task, _ in t.columns):
        label = next(lbl for lbl, tk, _ in t.columns if tk == task)
        metric = t.metrics.get(label, "acc")
        state, cost = [], []
        for c in (c for c in t.cells if c.column == label and finite(c.line.get("ours"))):
            fam = family_of(c.model)
            recs = [report.records[r].rec for r in c.records if r in report.records]
            states = [r.get("stream_state", {}).get("bytes") for r in recs]
            tip = f"{c.row} ({c.model}): {c.line['ours']:.1f}%"
            if recs and all(finite(s) and s > 0 for s in states):
                b = sum(states) / len(states)
                state.append(
                    {
                        "x": b,
                        "y": c.line["ours"],
                        "name": fam,
                        "colour": colours.get(fam, "#333"),
                        "href": f"#{c.id}",
                        "tip": f"{tip}, state {b:,.0f} bytes",
                    }
                )
            row = _cost_for(report, task, c.model)
            if row:
                cost.append(
                    {
                        "x": row["step_s"],
                        "y": c.line["ours"],
                        "name": fam,
                        "colour": colours.get(fam, "#333"),
                        "href": f"#{row['_id']}",
                        "tip": f"{tip}, step {row['step_s']:.3g} s ({row['model']}, length {row.get('length')}, {row['_file']})",
                    }
                )
        if state:
            cap = (
                f"{task}, column {label}: {metric} against the streaming state's bytes after the task's longest test "
                "length (the records' stream_state; log x)"
            )
            plots.append(
                f"<figure>{svg.scatter(f'{t.stem}-state-{task}', cap, state, 'state bytes', f'{metric} (%)')}"
                f"<figcaption>{e(cap)}</figcaption></figure>"
            )
        if cost:
            cap = (
                f"{task}, column {label}: {metric} against the measured time of one training step (bench cost rows under "
                f"{report.out}/cost for the row's model, else its family, newest file; log x)"
            )
            plots.append(
                f"<figure>{svg.scatter(f'{t.stem}-cost-{task}', cap, cost, 'step time (s)', f'{metric} (%)')}"
                f"<figcaption>{e(cap)}</figcaption></figure>"
            )
    return plots


def _measurement(t: TableView) -> str:
    """A cost table's measurement file (its header), the record its cells link to."""
    files = [f for f in t.source_files if f.endswith("--measured.json")]
    if t.kind != "cost":
        return ""
    header = {}
    if files:
        try:
            with open(files[0], encoding="utf-8") as f:
                header = json.load(f).get("header", {})
        except (OSError, ValueError):
            header = {}
    return (
        f'<details id="{t.stem}-measured" class="record"><summary>measurement: {e(files[0] if files else "none")}</summary>'
        f"<pre>{e(json.dumps(header, indent=1))}</pre><p>measured again by <code>bench reproduce {e(t.name)} --run</code></p>"
        f"</details>"
    )


def _table(t: TableView, index: int, report: Report, colours: dict, plot_ids: dict) -> str:
    """One table's section; the ids of its plots go into ``plot_ids`` (the family pages link to them)."""
    body = _matrix(t) if t.kind == "results" and t.cells else _generic(t)
    plots = _curves(t, colours) + _scatters(t, report, colours)
    plot_ids[t.stem] = [(m.group(1), m.group(2)) for m in (re.search(r'<svg id="([^"]+)".*?aria-label="([^"]*)"', p) for p in plots) if m]
    files = ", ".join(f"<code>{e(f)}</code>" for f in t.source_files)
    return (
        f'<section class="table" id="tbl-{e(t.stem)}"><h3>{e(t.title)}</h3>'
        f'<p class="meta"><code>{e(t.command)}</code> · kind {e(t.kind)} · preset {e(t.preset)} · files {files}</p>'
        f'<details class="note"><summary>how to read it</summary><p>{e(t.note)}</p></details>'
        f"{body}{_cell_lines(t)}{_measurement(t)}{_claims(t, index)}"
        + (f'<h4>Plots</h4><div class="plots">{"".join(plots)}</div>' if plots else "")
        + "</section>"
    )


# ---- families -------------------------------------------------------------------------------


def family_outcomes(report: Report, family: str) -> list[tuple[str, TableView, int, object, str]]:
    """(win | loss | tie | no test | measured, table, claim index, pair, side) for every pair of
    cells a claim compares with ``family`` on one side and another family on the other, by that
    pair's own test (a pair that holds: the better side wins; reversed: the other side wins)."""
    found = []
    for t in report.tables:
        for i, cl in enumerate(t.claims):
            for q in cl.pairs:
                if q.better_family == q.than_family or family not in (q.better_family, q.than_family):
                    continue
                side = "better" if q.better_family == family else "than"
                if cl.line.get("ours") == "measured":
                    outcome = "measured"
                elif q.verdict in ("no test", "inconclusive"):
                    outcome = "no test" if q.verdict == "no test" else "tie"
                else:
                    outcome = OUTCOME[side, q.verdict]
                found.append((outcome, t, i, q, side))
    return found


def _n(count: int, word: str) -> str:
    return f"{count} {word}" + ("" if count == 1 else "es" if word.endswith("s") else "s")


def _family(report: Report, family: str, colours: dict, plot_ids: dict) -> str:
    outcomes = family_outcomes(report, family)
    counts = {k: sum(o == k for o, *_ in outcomes) for k in ("win", "loss", "tie", "measured", "no test")}
    rows = []
    order = {"loss": 0, "win": 1, "tie": 2, "measured": 3, "no test": 4}
    for outcome, t, i, q, side in sorted(outcomes, key=lambda o: order[o[0]]):
        line = t.claims[i].line
        d = _digits(t)
        flip = side == "than" and not q.ratio  # the difference as this family minus the other
        effect = None if q.effect is None else -q.effect if flip else q.effect
        ci = "—" if not q.ci else f"[{num(-q.ci[1], d)}, {num(-q.ci[0], d)}]" if flip else f"[{num(q.ci[0], d)}, {num(q.ci[1], d)}]"
        mine, other = (
            ((q.better, q.better_label), (q.than, q.than_label))
            if side == "better"
            else ((q.than, q.than_label), (q.better, q.better_label))
        )
        rows.append(
            f'<tr><td class="o {outcome.replace(" ", "-")}">{outcome}</td>'
            f'<td><a href="#{mine[0]}">{e(mine[1])}</a></td><td><a href="#{other[0]}">{e(other[1])}</a></td>'
            f'<td><a href="#{t.stem}-k{i}">{e(line.get("claim"))}</a> ({"named better" if side == "better" else "named worse"})'
            f'</td><td><a href="#tbl-{e(t.stem)}">{e(t.stem)}</a></td>'
            f'<td class="num">{num(effect, d)}</td><td class="num">{ci}</td><td class="num">{p_text(q.p)}</td></tr>'
        )
    claims = (
        (
            f'<table class="outcomes"><thead><tr><th>outcome</th><th>this family\'s cell</th><th>against</th><th>claim</th>'
            f"<th>table</th><th>Δ this − other (a ratio claim: named better / worse)</th><th>90% CI</th>"
            f"<th>p (one-sided; reversed: Holm)</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
        if rows
        else "<p>No claim of the tables compares this family with another.</p>"
    )
    cells = []
    for t in report.tables:
        mine = [c for c in t.cells if family_of(c.model) == family]
        if mine and t.kind == "results":
            items = " · ".join(f'{e(c.row)} / {e(c.column)}: <a href="#{c.id}">{e(_ours(t, c.line))}</a>' for c in mine)
            cells.append(f'<li><a href="#tbl-{e(t.stem)}">{e(t.stem)}</a>: {items}</li>')
        elif mine and t.kind == "cost":
            items = " · ".join(f'{e(c.row)} / {e(c.column)}: <a href="#{c.id}">{num(c.line.get("step_s"), 3)} s/step</a>' for c in mine)
            cells.append(f'<li><a href="#tbl-{e(t.stem)}">{e(t.stem)}</a> (cost table): {items}</li>')
    with_it = [t for t in report.tables if t.kind == "results" and any(family_of(c.model) == family for c in t.cells)]
    plots = "".join(f'<li><a href="#{ident}">{label}</a></li>' for t in with_it for ident, label in plot_ids.get(t.stem, []))  # escaped
    cost = [r for r in report.cost_rows if family_of(r["model"]) == family]
    cost_rows = "".join(
        f'<tr><td><a href="#{r["_id"]}">{e(r["model"])}</a></td><td>{e(r["_task"])}</td><td>{e(r["_preset"])}</td>'
        f'<td>{e(r["_measurement"])}</td><td class="num">{num(r.get("length"), 0)}</td><td class="num">{num(r.get("step_s"), 4)}</td>'
        f'<td class="num">{num(r.get("step_s_ratio"), 2)}</td><td class="num">{num(r.get("peak_bytes"), 0)}</td>'
        f"<td>{e(r['_file'])}</td></tr>"
        for r in cost
    )
    cost_html = (
        f"<table><thead><tr><th>model</th><th>task</th><th>preset</th><th>measurement</th><th>length</th><th>step s</th>"
        f"<th>× transformer</th><th>peak bytes</th><th>file</th></tr></thead><tbody>{cost_rows}</tbody></table>"
        if cost
        else "<p>No bench cost rows for this family.</p>"
    )
    return (
        f'<section class="view" id="fam-{e(family)}"><h2><span class="swatch" style="background:{colours.get(family, "#333")}">'
        f'</span>{e(family)}</h2><p class="tally">by the tables\' own tests: <b class="o win">{_n(counts["win"], "win")}</b>, '
        f'<b class="o loss">{_n(counts["loss"], "loss")}</b>, <b class="o tie">{_n(counts["tie"], "tie")}</b> (inconclusive)'
        + (f", {counts['measured']} open questions measured" if counts["measured"] else "")
        + (f", {counts['no test']} without a test (fewer than 2 seeds a side, or both cells at chance)" if counts["no test"] else "")
        + ". Per pair of cells a claim compares (this family against another), by that pair's own test in the "
        "claim: a win when the pair holds with this family on the better side or is reversed with it on the other "
        "(significant against the claim after Holm over the claim's pairs), a loss the other way round, a tie when "
        f"inconclusive.</p><h3>Where it wins, loses or ties</h3>{claims}"
        f'<h3>Its cells</h3><ul class="cells">{"".join(cells) or "<li>none</li>"}</ul>'
        f"<h3>Plots with it (per-length accuracy, accuracy against state bytes and step time)</h3>"
        f'<ul class="plots-list">{plots or "<li>none</li>"}</ul>'
        f"<h3>What it costs (bench cost)</h3>{cost_html}</section>"
    )


# ---- records, cost rows ---------------------------------------------------------------------


def _record(report: Report, view) -> str:
    rid = view.id
    r = view.rec
    git = r.get("git") or {}
    metrics = "".join(
        f'<tr><td>{e(s)}</td><td class="num">{num(m.get("n"), 0)}</td><td class="num">{num(m.get("acc"), 4)}</td>'
        f'<td class="num">{num(m.get("token_acc"), 4)}</td><td>'
        + (
            f'<button class="oc" data-rec="{rid}" data-split="{e(s)}">open its {view.outcomes[s][1]} outcomes</button>'
            if s in view.outcomes
            else "no outcomes kept"
        )
        + "</td></tr>"
        for s, m in (r.get("metrics") or {}).items()
        if isinstance(m, dict)
    )
    tag = r.get("overrides") or []
    said = f" · {e(str(r['trouble'][0]).split(':')[0])}" if r.get("trouble") else ""  # collapsed, diverged, stuck
    return (
        f'<details class="record" id="{rid}"><summary>{rid}: {e(r.get("model"))} · {e(r.get("task"))} · {e(r.get("preset"))} · '
        f"seed {e(r.get('seed'))}{' · ' + e(' '.join(tag)) if tag else ''}{said}</summary>"
        f"<dl><dt>file</dt><dd><code>{e(view.path)}</code></dd><dt>seed</dt><dd>{e(r.get('seed'))}</dd>"
        f"<dt>commit</dt><dd><code>{e(git.get('commit', '?'))}</code>{' (dirty tree)' if git.get('dirty') else ''}"
        f"{' — ' + e(git['note']) if git.get('note') else ''}</dd><dt>date</dt><dd>{e(r.get('date', ''))}</dd>"
        f"<dt>made by</dt><dd><code>{e(r.get('command', ''))}</code></dd>"
        f"<dt>train it again</dt><dd><code>{e(view.rerun(report.out))}</code></dd>"
        f"<dt>outcomes in Python</dt><dd><code>bench.load_outcomes({e(repr(view.path))})</code></dd>"
        f"<dt>params</dt><dd>{num(r.get('param_count'), 0)}</dd><dt>train time</dt><dd>{num(r.get('train_time_s'), 0)} s</dd>"
        + (f'<dt>trouble</dt><dd class="trouble">{e("; ".join(r["trouble"]))}</dd>' if r.get("trouble") else "")
        + "</dl>"
        f'<table class="metrics"><thead><tr><th>split</th><th>n</th><th>acc</th><th>token acc</th><th>per example</th></tr>'
        f'</thead><tbody>{metrics}</tbody></table><div class="ocview"></div>'
        f"<details><summary>config</summary><pre>{e(json.dumps(r.get('config'), indent=1))}</pre></details></details>"
    )


def _cost_view(report: Report) -> str:
    keys = ["model", "length", "batch", "step_s", "step_s_ratio", "tokens_per_s", "peak_bytes", "ops", "syncs", "halt_depth"]
    rows = "".join(
        f'<tr id="{r["_id"]}">'
        + "".join(
            f'<td class="num">{num(r.get(k), 4 if k.startswith("step") else 0)}</td>'
            if finite(r.get(k))
            else f"<td>{e(r.get(k) if r.get(k) is not None else '')}</td>"
            for k in keys
        )
        + f"<td>{e(r['_task'])}</td><td>{e(r['_preset'])}</td><td>{e(r['_measurement'])}</td><td>{e(r['_device'])}</td>"
        f"<td><code>{e(r['_commit'])}</code></td><td>{e(r['_date'])}</td><td><code>{e(r['_file'])}</code></td></tr>"
        for r in report.cost_rows
    )
    head = "".join(f"<th>{k}</th>" for k in [*keys, "task", "preset", "measurement", "device", "commit", "date", "file"])
    return (
        f'<section class="view" id="view-cost"><h2>Measured cost (bench cost)</h2><p>Every row of the bench cost files under '
        f"<code>{e(report.out)}/cost</code>: one training (or halting, streaming) step per model and length, timed on the "
        f"device named; newest first. Make them again with the command in the file's README.</p>"
        f'<div class="scroll"><table class="costrows"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div></section>'
    )


# ---- the page -------------------------------------------------------------------------------


def _overview(report: Report) -> str:
    tables = "".join(
        f'<tr><td><a href="#tbl-{e(t.stem)}">{e(t.stem)}</a></td><td>{e(t.title)}</td><td>{e(t.kind)}</td><td>{e(t.preset)}</td>'
        f'<td class="num">{len(t.cells)}</td><td>'
        + ", ".join(
            f"{sum(c.line.get('ours') == v for c in t.claims)} {v}"
            for v in ("holds", "does not hold", "inconclusive", "measured")
            if any(c.line.get("ours") == v for c in t.claims)
        )
        + "</td></tr>"
        for t in report.tables
    )
    fams = []
    for f in report.families:
        outs = [o for o, *_ in family_outcomes(report, f)]
        fams.append(
            f'<tr><td><a href="#fam-{e(f)}">{e(f)}</a></td><td class="num o win">{outs.count("win")}</td>'
            f'<td class="num o loss">{outs.count("loss")}</td><td class="num o tie">{outs.count("tie")}</td>'
            f'<td class="num">{outs.count("no test")}</td>'
            f'<td class="num">{sum(family_of(r["model"]) == f for r in report.cost_rows)}</td></tr>'
        )
    return (
        f'<section class="view" id="view-overview"><h2>What bench has found</h2><p>Built from <code>{e(report.out)}</code>: '
        f"{len(report.tables)} tables, {sum(len(t.cells) for t in report.tables)} cells, {len(report.records)} run records, "
        f"{len(report.cost_rows)} cost rows. Every number links to its cell, every cell to the records it read (config, "
        f"seed, commit, the command to train it again), every record to its per-example outcomes.</p>"
        + ("".join(f'<p class="skipped">Left out: <code>{e(md)}</code>: {e(why)}</p>' for md, why in report.skipped))
        + f'<h3>Tables</h3><table id="overview-tables"><thead><tr><th>table</th><th>title</th><th>kind</th><th>preset</th>'
        f"<th>cells</th><th>claims (ours)</th></tr></thead><tbody>{tables}</tbody></table>"
        f'<h3>Families</h3><table id="overview-families"><thead><tr><th>family</th><th>wins</th><th>losses</th><th>ties</th>'
        f"<th>no test</th><th>cost rows</th></tr></thead><tbody>{''.join(fams)}</tbody></table></section>"
    )


def render(report: Report) -> str:
    """The whole page as one string."""
    colours = _colours(report)
    used = {rid for t in report.tables for c in t.cells for rid in c.records}
    ordered = [v for v in report.records.values() if v.id in used]
    outcomes = {v.id: {s: list(x) for s, x in v.outcomes.items()} for v in report.records.values() if v.id in used and v.outcomes}
    plot_ids: dict = {}
    tables = "".join(_table(t, i, report, colours, plot_ids) for i, t in enumerate(report.tables))
    nav = (
        '<a href="#view-overview">Overview</a><a href="#view-tables">Tables</a><a href="#view-cost">Cost</a>'
        '<a href="#view-records">Records</a>'
    )
    fam_nav = "".join(f'<a href="#fam-{e(f)}">{e(f)}</a>' for f in report.families)
    toc = "".join(f'<li><a href="#tbl-{e(t.stem)}">{e(t.stem)}</a>: {e(t.title)}</li>' for t in report.tables)
    data = json.dumps(outcomes, separators=(",", ":")).replace("</", "<\\/")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">'
        f"<title>bench report: {e(report.out)}</title><style>{CSS}</style></head><body>"
        f'<header><nav>{nav}</nav><div class="fams">families: {fam_nav}</div></header><main>'
        f"{_overview(report)}"
        f'<section class="view" id="view-tables"><h2>Tables</h2><ul>{toc}</ul>{tables}</section>'
        f"{''.join(_family(report, f, colours, plot_ids) for f in report.families)}"
        f"{_cost_view(report)}"
        f'<section class="view" id="view-records"><h2>Records</h2><p>Every run record a cell read ({len(ordered)}).</p>'
        f"{''.join(_record(report, view) for view in ordered)}</section>"
        f'</main><script type="application/json" id="outcomes-data">{data}</script><script>{JS}</script></body></html>'
    )
