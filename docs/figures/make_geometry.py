"""Draws docs/figures/geometry.png: window/phase geometry of a chunked KV cache.

Run: .venv/bin/python docs/figures/make_geometry.py
"""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

STEP, WINDOW, ALIGN, LOCAL, N, QUERY = 4, 8, 0, 3, 18, 13


def main() -> None:
    fig, ax = plt.subplots(figsize=(11, 4.6))
    colors = plt.get_cmap("tab10")
    for p in range(N):
        phase = (p - ALIGN) % STEP
        boundary = phase == STEP - 1
        ax.add_patch(Rectangle((p, 5), 1, 1, facecolor=colors(phase), alpha=0.35, edgecolor="black"))
        ax.text(
            p + 0.5,
            5.5,
            str(phase),
            ha="center",
            va="center",
            fontsize=10,
            weight="bold" if boundary else None,
        )
        ax.text(p + 0.5, 6.3, str(p), ha="center", va="center", fontsize=8)
    ax.text(-0.3, 6.3, "position", ha="right", va="center", fontsize=9)
    ax.text(-0.3, 5.5, "phase (p - a) mod s", ha="right", va="center", fontsize=9)
    ends = [e for e in range(N) if (e - ALIGN) % STEP == STEP - 1]
    for j, e in enumerate(ends):
        y = 4 - 0.8 * j
        start = max(e - WINDOW + 1, 0)
        if e - WINDOW + 1 < 0:
            ax.add_patch(
                Rectangle((e - WINDOW + 1, y), start - (e - WINDOW + 1), 0.6, fill=False, hatch="//", ec="grey")
            )
        visible = e <= QUERY
        ax.add_patch(
            Rectangle((start, y), e + 1 - start, 0.6, facecolor="tab:green" if visible else "lightgrey", ec="black")
        )
        ax.text(
            e + 1.2,
            y + 0.3,
            f"entry {j}: ends at e={e}" + (" (visible to t)" if visible else ""),
            va="center",
            fontsize=8,
        )
    ax.add_patch(Rectangle((QUERY - LOCAL + 1, 7), LOCAL, 0.6, facecolor="tab:orange", ec="black"))
    ax.text(QUERY - LOCAL + 0.8, 7.3, f"raw local window L={LOCAL}", ha="right", va="center", fontsize=8)
    ax.annotate(
        "query t",
        xy=(QUERY + 0.5, 6.6),
        xytext=(QUERY + 0.5, 8.2),
        ha="center",
        arrowprops=dict(arrowstyle="->"),
    )
    ax.set_xlim(-7.5, N + 6)
    ax.set_ylim(-0.4, 8.8)
    ax.axis("off")
    ax.set_title(
        f"Chunked KV compression, step s={STEP}, window w={WINDOW}, align a={ALIGN} "
        "(DeepSeek-V4 CSA geometry). "
        "Entries end at phase s-1 (bold);\nhatched slots lie before position 0 (zero weight). "
        "Inclusive visibility: query t sees entries with e <= t, plus raw tokens t-L+1..t.",
        fontsize=9,
    )
    out = Path(__file__).with_name("geometry.png")
    fig.savefig(out, dpi=130, bbox_inches="tight")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
