"""Server-rendered SVG: memory against context, with the card's limit and the max context."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

COLORS = ("#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c")
W, H = 640, 300
#: the chart's size on a phone (its own drawing, text the larger for it: static/kvplan.css)
NARROW = (400, 280)
PAD_L, PAD_R, PAD_T, PAD_B = 56, 16, 16, 40


def nice_tokens(n: int) -> int:
    """The least axis end of at least ``n`` tokens whose quarters are round context lengths:
    4 × a step of 1 or 1.5 × 2^k tokens (…, 16k, 24k, 32k, 48k, …)."""
    step = 256
    while 4 * step < n:
        step = step * 3 // 2 if step & (step - 1) == 0 else step * 4 // 3
    return 4 * step


def _nice_bytes(n: float) -> float:
    """The least axis end of at least ``n`` bytes whose quarters are round in GiB: 4 × 1, 1.5,
    2, 2.5, 3, 4, 5, 6 or 8 × 10^k GiB."""
    gib = 1024**3
    quarter = max(n, 1) / gib / 4
    scale = 10.0 ** math.floor(math.log10(quarter))
    # scale ≤ quarter < 10 · scale, so one of them is reached
    m = next(m for m in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10)
             if m * scale >= quarter * (1 - 1e-12))
    return 4 * m * scale * gib


def _tokens(n: float) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):g}M"
    if n >= 1 << 10:
        return f"{n / (1 << 10):g}k"
    return f"{int(n)}"


def memory_chart(
    series: Sequence[tuple[str, Sequence[tuple[int, int]]]],
    *,
    limit_bytes: int | None,
    max_context: int | None,
    context: int,
    ask_bytes: int | None = None,
    colors: Sequence[str] | None = None,
    size: tuple[int, int] = (W, H),
    narrow: bool = False,
) -> str:
    """Lines of (context, bytes) per series; a dashed line at the card's limit; a marker at
    the max context of the first series; a point at the requested context, on the first
    series' line at ``ask_bytes`` (what it needs there) and labelled with it, or on the axis
    where that is not given. ``colors``: one a series (COLORS in turn by default); ``size``:
    the drawing's width and height; ``narrow``: the phone's drawing (class "chart narrow")."""
    W, H = size  # noqa: N806 (the module's names for the drawing's size)
    # the text's size in the drawing's units (static/kvplan.css), and a rough width a character
    font = 14 if narrow else 11
    char = 0.6 * font
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    x_max = max(xs + [context])
    y_max = _nice_bytes(max(ys + [limit_bytes or 0, ask_bytes or 0]) * 1.05)
    gib = 1024**3

    def px(x: float) -> float:
        return PAD_L + (W - PAD_L - PAD_R) * x / x_max

    def py(y: float) -> float:
        return H - PAD_B - (H - PAD_T - PAD_B) * y / y_max

    out = [f'<svg class="chart{" narrow" if narrow else ""}" viewBox="0 0 {W} {H}" role="img" '
           f'aria-label="memory against context" xmlns="http://www.w3.org/2000/svg">']
    for i in range(5):
        y = y_max * i / 4
        out.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{py(y):.1f}" y2="{py(y):.1f}" '
                   'class="grid"/>')
        out.append(f'<text x="{PAD_L - 6}" y="{py(y) + 4:.1f}" text-anchor="end">'
                   f'{round(y / gib, 3):g} GiB</text>')
    for i in range(5):
        x = x_max * i / 4
        # the last tick's label ends at the drawing's edge rather than running past it
        at, anchor = (W - 2, "end") if i == 4 else (px(x), "middle")
        out.append(f'<text x="{at:.1f}" y="{H - PAD_B + 18}" text-anchor="{anchor}">'
                   f'{_tokens(x)}</text>')
    out.append(f'<text x="{(W + PAD_L) / 2:.0f}" y="{H - 4}" text-anchor="middle">'
               'context per sequence (tokens)</text>')
    # the card's label, right-aligned above its line (the ask label steps clear of it below)
    card = f"card {limit_bytes / gib:.1f} GiB" if limit_bytes else ""
    card_y = py(limit_bytes) - 5 if limit_bytes else 0.0
    if limit_bytes:
        out.append(f'<line x1="{PAD_L}" x2="{W - PAD_R}" y1="{py(limit_bytes):.1f}" '
                   f'y2="{py(limit_bytes):.1f}" class="limit"/>')
        out.append(f'<text x="{W - PAD_R}" y="{card_y:.1f}" text-anchor="end" '
                   f'class="limit-label">{card}</text>')
    for i, (name, pts) in enumerate(series):
        color = colors[i] if colors else COLORS[i % len(COLORS)]
        path = " ".join(f"{'M' if j == 0 else 'L'}{px(x):.1f},{py(y):.1f}"
                        for j, (x, y) in enumerate(pts))
        out.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="2.5" '
                   f'data-series="{escape(name)}"/>')
        out.append(f'<text x="{PAD_L + 8}" y="{PAD_T + 14 + (font + 5) * i}" style="fill:{color}" '
                   f'class="series-label">{escape(name)}</text>')
    if max_context and max_context <= x_max:
        out.append(f'<line x1="{px(max_context):.1f}" x2="{px(max_context):.1f}" y1="{PAD_T}" '
                   f'y2="{H - PAD_B}" class="maxctx" data-max-context="{max_context}"/>')
        # the label on the side of the line with room, below the series' names where it
        # would run into them
        right = px(max_context) < (W + PAD_L) / 2
        y = PAD_T + 10
        if right and px(max_context) < PAD_L + 90:
            y = PAD_T + 18 + (font + 5) * len(series)
        out.append(f'<text x="{px(max_context) + (4 if right else -4):.1f}" y="{y}" '
                   f'text-anchor="{"start" if right else "end"}" '
                   f'class="maxctx-label">max {max_context:,}</text>')
    cy = py(ask_bytes) if ask_bytes is not None else H - PAD_B
    out.append(f'<circle cx="{px(context):.1f}" cy="{cy:.1f}" r="5" class="ask" '
               f'data-context="{context}"'
               + (f' data-bytes="{ask_bytes}"' if ask_bytes is not None else "") + "/>")
    if ask_bytes is not None:  # the label beside the point, on the side with room
        right = px(context) < (W + PAD_L) / 2
        text = f"{_tokens(context)}: {ask_bytes / gib:.1f} GiB"
        left = px(context) + 9 if right else px(context) - 9 - char * len(text)
        y = cy - 9
        if limit_bytes:
            # below the point where it would run into the card's label
            card_left = W - PAD_R - char * len(card)
            if (left + char * len(text) > card_left and left < W - PAD_R
                    and abs(y - card_y) < font + 2):
                y = cy + 9 + font
        out.append(f'<text x="{px(context) + (9 if right else -9):.1f}" y="{y:.1f}" '
                   f'text-anchor="{"start" if right else "end"}" class="ask-label">'
                   f'{text}</text>')
    out.append("</svg>")
    return "".join(out)
