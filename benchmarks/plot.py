"""A dependency-free SVG line plot with log-log axes and many series.

Why log-log: sizes span 1 to 5,000 intents and times span milliseconds to minutes; on log-log
axes a cost linear in N is a line of slope 1, so superlinear growth shows as a steeper line.
Why no library: the results must be reproducible by ``make bench`` alone, with nothing to
install beyond the project's own environment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape
from pathlib import Path

WIDTH, HEIGHT = 760, 480
LEFT, RIGHT, TOP, BOTTOM = 70, 230, 48, 55
MAX_DECADES_WITH_MINOR_LABELS = 3
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#7f7f7f")


@dataclass(frozen=True)
class Series:
    label: str
    points: list[tuple[float, float]]
    color: str
    dashed: bool = False


@dataclass(frozen=True)
class _LogAxis:
    low: float  # decades, floor/ceil of the data's log10 range
    high: float
    start: float  # pixel positions of low and high
    end: float

    @classmethod
    def fit(cls, values: list[float], start: float, end: float) -> _LogAxis:
        logs = [math.log10(v) for v in values if v > 0] or [0.0]
        low, high = math.floor(min(logs)), math.ceil(max(logs))
        return cls(low, high if high > low else low + 1, start, end)

    def __call__(self, value: float) -> float:
        fraction = (math.log10(value) - self.low) / (self.high - self.low)
        return self.start + fraction * (self.end - self.start)

    def ticks(self) -> list[tuple[float, bool]]:
        """(value, labelled) for 1, 2 and 5 times every decade in range; on a wide axis only
        the decades are labelled, so labels never overlap."""
        decades = range(int(self.low), int(self.high) + 1)
        few = self.high - self.low <= MAX_DECADES_WITH_MINOR_LABELS
        found = [(m * 10.0**d, m == 1 or few) for d in decades for m in (1, 2, 5)]
        return [(v, labelled) for v, labelled in found if v <= 10.0**self.high * 1.0001]


def _decade(value: float) -> bool:
    return math.isclose(math.log10(value), round(math.log10(value)), abs_tol=1e-9)


def _label(value: float) -> str:
    return f"{value:g}" if 1e-3 <= value < 1e5 else f"{value:.0e}"


def _grid(x1: float, y1: float, x2: float, y2: float, major: bool) -> str:
    color = "#ccc" if major else "#eee"
    return f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{color}"/>'


def _text(x: float, y: float, anchor: str, text: str) -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{escape(text)}</text>'


def log_log_plot(
    path: Path,
    *,
    title: str,
    subtitle: str = "",
    x_label: str,
    y_label: str,
    series: list[Series],
) -> None:
    points = [p for s in series for p in s.points if p[0] > 0 and p[1] > 0]
    x = _LogAxis.fit([p[0] for p in points], LEFT, WIDTH - RIGHT)
    y = _LogAxis.fit([p[1] for p in points], HEIGHT - BOTTOM, TOP)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        'font-family="sans-serif" font-size="12">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="22" text-anchor="middle" '
        f'font-size="14">{escape(title)}</text>',
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="36" text-anchor="middle" '
        f'fill="#555">{escape(subtitle)}</text>',
    ]
    for value, labelled in x.ticks():
        parts.append(_grid(x(value), TOP, x(value), HEIGHT - BOTTOM, _decade(value)))
        if labelled:
            parts.append(_text(x(value), HEIGHT - BOTTOM + 16, "middle", _label(value)))
    for value, labelled in y.ticks():
        parts.append(_grid(LEFT, y(value), WIDTH - RIGHT, y(value), _decade(value)))
        if labelled:
            parts.append(_text(LEFT - 6, y(value) + 4, "end", _label(value)))
    parts += [
        f'<rect x="{LEFT}" y="{TOP}" width="{WIDTH - RIGHT - LEFT}" '
        f'height="{HEIGHT - BOTTOM - TOP}" fill="none" stroke="black"/>',
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{HEIGHT - 12}" text-anchor="middle">'
        f"{escape(x_label)}</text>",
        f'<text x="16" y="{(TOP + HEIGHT - BOTTOM) / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {(TOP + HEIGHT - BOTTOM) / 2})">{escape(y_label)}</text>',
    ]
    for index, s in enumerate(series):
        shown = sorted(p for p in s.points if p[0] > 0 and p[1] > 0)
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        coords = " ".join(f"{x(a):.1f},{y(b):.1f}" for a, b in shown)
        parts.append(
            f'<polyline points="{coords}" fill="none" stroke="{s.color}" stroke-width="2"{dash}/>'
        )
        parts += [
            f'<circle cx="{x(a):.1f}" cy="{y(b):.1f}" r="3" fill="{s.color}"/>' for a, b in shown
        ]
        legend_y = TOP + 8 + 18 * index
        legend_x = WIDTH - RIGHT + 12
        parts.append(
            f'<line x1="{legend_x}" y1="{legend_y}" x2="{legend_x + 24}" y2="{legend_y}" '
            f'stroke="{s.color}" stroke-width="2"{dash}/>'
        )
        parts.append(f'<text x="{legend_x + 30}" y="{legend_y + 4}">{escape(s.label)}</text>')
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")
