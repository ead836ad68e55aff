"""Plots as inline SVG text (no script, nothing fetched): line charts (accuracy per length, the
chance level dashed) and scatter charts (accuracy against state bytes or step time, log x), one
colour per series. Each mark carries a <title> (its values on hover) and, where given, a link."""

from __future__ import annotations

import math
from html import escape

#: one colour per series (the Tableau 10 palette), in order of first appearance
PALETTE = [
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#1f77b4",
    "#8c564b",
    "#17becf",
    "#bcbd22",
    "#7f7f7f",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#e377c2",
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
]
W, H, LEFT, RIGHT, TOP, BOTTOM = 640, 320, 56, 170, 16, 42


def colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    if hi <= lo:
        return [lo]
    step = 10 ** math.floor(math.log10((hi - lo) / n))
    for m in (1, 2, 5, 10):
        if (hi - lo) / (step * m) <= n:
            step *= m
            break
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def _fmt(v: float) -> str:
    if v and (abs(v) >= 1e5 or abs(v) < 1e-2):
        return f"{v:.0e}".replace("e+0", "e").replace("e-0", "e-")
    return f"{v:g}"


class Axes:
    """A plot area mapping data to pixels; ``log``: the x axis in log10."""

    def __init__(self, xs: list[float], ys: list[float], log: bool = False, y_range: tuple[float, float] | None = None):
        self.log = log
        tx = [math.log10(x) for x in xs if x > 0] if log else list(xs)
        self.x0, self.x1 = (min(tx), max(tx)) if tx else (0.0, 1.0)
        if self.x1 == self.x0:
            self.x0, self.x1 = self.x0 - 0.5, self.x1 + 0.5
        pad = 0.04 * (self.x1 - self.x0)
        self.x0, self.x1 = self.x0 - pad, self.x1 + pad
        self.y0, self.y1 = y_range or ((min(ys), max(ys)) if ys else (0.0, 1.0))
        if self.y1 == self.y0:
            self.y0, self.y1 = self.y0 - 1, self.y1 + 1

    def px(self, x: float) -> float:
        t = math.log10(x) if self.log else x
        return LEFT + (t - self.x0) / (self.x1 - self.x0) * (W - LEFT - RIGHT)

    def py(self, y: float) -> float:
        return H - BOTTOM - (y - self.y0) / (self.y1 - self.y0) * (H - TOP - BOTTOM)

    def frame(self, xlabel: str, ylabel: str) -> list[str]:
        parts = [f'<rect x="{LEFT}" y="{TOP}" width="{W - LEFT - RIGHT}" height="{H - TOP - BOTTOM}" class="frame"/>']
        for y in _ticks(self.y0, self.y1):
            parts.append(
                f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{self.py(y):.1f}" y2="{self.py(y):.1f}" class="grid"/>'
                f'<text x="{LEFT - 4}" y="{self.py(y) + 4:.1f}" text-anchor="end">{_fmt(y)}</text>'
            )
        if self.log:
            xt = [10**e for e in range(math.floor(self.x0), math.ceil(self.x1) + 1) if self.x0 <= e <= self.x1]
        else:
            xt = _ticks(self.x0, self.x1, 6)
        for x in xt:
            parts.append(
                f'<line y1="{TOP}" y2="{H - BOTTOM}" x1="{self.px(x):.1f}" x2="{self.px(x):.1f}" class="grid"/>'
                f'<text x="{self.px(x):.1f}" y="{H - BOTTOM + 14}" text-anchor="middle">{_fmt(x)}</text>'
            )
        parts.append(
            f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - 6}" text-anchor="middle" class="label">{escape(xlabel)}</text>'
            f'<text transform="translate(14 {(TOP + H - BOTTOM) / 2}) rotate(-90)" text-anchor="middle" '
            f'class="label">{escape(ylabel)}</text>'
        )
        return parts


def _legend(names: list[tuple[str, str]]) -> list[str]:
    parts = []
    for i, (name, col) in enumerate(names[:18]):
        y = TOP + 6 + 15 * i
        parts.append(
            f'<rect x="{W - RIGHT + 10}" y="{y - 8}" width="10" height="10" fill="{col}"/>'
            f'<text x="{W - RIGHT + 24}" y="{y + 1}" class="legend">{escape(name[:24])}</text>'
        )
    if len(names) > 18:
        parts.append(f'<text x="{W - RIGHT + 10}" y="{TOP + 6 + 15 * 18}" class="legend">+{len(names) - 18} more</text>')
    return parts


def _svg(kind: str, ident: str, parts: list[str], title: str) -> str:
    return (
        f'<svg id="{ident}" class="plot {kind}" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">' + "".join(parts) + "</svg>"
    )


def line_chart(
    ident: str,
    title: str,
    series: list[tuple[str, str, list[float], list[float]]],
    xlabel: str,
    ylabel: str,
    chance: tuple[list[float], list[float]] | None = None,
) -> str:
    """Lines (name, colour, xs, ys), y in % (0-100), and the chance level as a dashed grey step line."""
    xs = [x for _, _, sx, _ in series for x in sx] + (list(chance[0]) if chance else [])
    ax = Axes(xs, [], y_range=(0.0, 100.0))
    parts = ax.frame(xlabel, ylabel)
    if chance and chance[0]:
        pts = " ".join(f"{ax.px(x):.1f},{ax.py(y):.1f}" for x, y in zip(*chance))
        parts.append(f'<polyline points="{pts}" class="chance"><title>chance level</title></polyline>')
    for name, col, sx, sy in series:
        pts = " ".join(f"{ax.px(x):.1f},{ax.py(y):.1f}" for x, y in zip(sx, sy))
        parts.append(f'<polyline points="{pts}" fill="none" stroke="{col}" stroke-width="1.8"/>')
        parts += [
            f'<circle cx="{ax.px(x):.1f}" cy="{ax.py(y):.1f}" r="2.6" fill="{col}"><title>{escape(name)}: length '
            f"{x:g}, {y:.1f}%</title></circle>"
            for x, y in zip(sx, sy)
        ]
    names = [(n, c) for n, c, _, _ in series] + ([("chance level", "#888")] if chance and chance[0] else [])
    return _svg("line", ident, parts + _legend(names), title)


def scatter(ident: str, title: str, points: list[dict], xlabel: str, ylabel: str, log: bool = True) -> str:
    """Points ({x, y, name, colour, tip, href}), x on a log axis by default, y in % (0-100)."""
    ax = Axes([p["x"] for p in points], [], log=log, y_range=(0.0, 100.0))
    parts = ax.frame(xlabel, ylabel)
    for p in points:
        mark = (
            f'<circle cx="{ax.px(p["x"]):.1f}" cy="{ax.py(p["y"]):.1f}" r="5" fill="{p["colour"]}" fill-opacity="0.85">'
            f"<title>{escape(p['tip'])}</title></circle>"
        )
        parts.append(f'<a href="{escape(p["href"])}">{mark}</a>' if p.get("href") else mark)
    names = list(dict.fromkeys((p["name"], p["colour"]) for p in points))
    return _svg("scatter", ident, parts + _legend(names), title)
