"""Benchmark results as data plus a picture: JSON and a dependency-free SVG line plot."""

from __future__ import annotations

import json
from pathlib import Path

WIDTH, HEIGHT, MARGIN = 640, 400, 60
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")


def line_plot(
    path: Path,
    *,
    title: str,
    x_label: str,
    y_label: str,
    series: dict[str, list[tuple[float, float]]],
) -> None:
    points = [p for values in series.values() for p in values]
    x_max = max(x for x, _ in points) or 1.0
    y_max = max(y for _, y in points) or 1.0

    def sx(x: float) -> float:
        return MARGIN + x / x_max * (WIDTH - 2 * MARGIN)

    def sy(y: float) -> float:
        return HEIGHT - MARGIN - y / y_max * (HEIGHT - 2 * MARGIN)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        'font-family="sans-serif" font-size="12">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{WIDTH / 2}" y="20" text-anchor="middle" font-size="14">{title}</text>',
        f'<line x1="{MARGIN}" y1="{HEIGHT - MARGIN}" x2="{WIDTH - MARGIN}" '
        f'y2="{HEIGHT - MARGIN}" stroke="black"/>',
        f'<line x1="{MARGIN}" y1="{MARGIN}" x2="{MARGIN}" y2="{HEIGHT - MARGIN}" stroke="black"/>',
        f'<text x="{WIDTH / 2}" y="{HEIGHT - 15}" text-anchor="middle">{x_label}</text>',
        f'<text x="15" y="{HEIGHT / 2}" transform="rotate(-90 15 {HEIGHT / 2})" '
        f'text-anchor="middle">{y_label}</text>',
        f'<text x="{MARGIN - 5}" y="{MARGIN}" text-anchor="end">{y_max:.3g}</text>',
        f'<text x="{WIDTH - MARGIN}" y="{HEIGHT - MARGIN + 15}" '
        f'text-anchor="end">{x_max:.3g}</text>',
    ]
    for index, (name, values) in enumerate(sorted(series.items())):
        color = COLORS[index % len(COLORS)]
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in sorted(values))
        parts.append(f'<polyline points="{coords}" fill="none" stroke="{color}" stroke-width="2"/>')
        parts += [
            f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3" fill="{color}"/>' for x, y in values
        ]
        parts.append(
            f'<text x="{WIDTH - MARGIN - 150}" y="{MARGIN + 16 * index}" '
            f'fill="{color}">{name}</text>'
        )
    parts.append("</svg>")
    path.write_text("\n".join(parts) + "\n")


def save(name: str, results: dict[int, dict[str, float]], *, title: str, y_label: str) -> None:
    """Write ``results/<name>.json`` and ``results/<name>.svg`` (one line per measured step)."""
    directory = Path(__file__).parent / "results"
    directory.mkdir(exist_ok=True)
    (directory / f"{name}.json").write_text(json.dumps(results, indent=2) + "\n")
    steps = next(iter(results.values())).keys()
    series = {step: [(float(n), r[step]) for n, r in results.items()] for step in steps}
    line_plot(
        directory / f"{name}.svg", title=title, x_label="intents N", y_label=y_label, series=series
    )
