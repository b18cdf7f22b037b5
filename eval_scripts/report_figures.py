"""The report's figures (PNG, matplotlib's Agg backend): SEQ per run, the per-subscale heatmap, direct vs sequential.

Each function takes plain, already-computed values (report.py computes them) and
draws one figure; none reads a run directory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

SEQ_MIN, SEQ_MAX = 40.0, 160.0  # SPEC §6: SEQ is clipped to this range
KIND_MARK = {"model": "", "baseline": " †", "ablation": " ‡"}
KIND_COLOUR = {"model": "#2f6db5", "baseline": "#9a9a9a", "ablation": "#8fb7e3"}
MEDIAN_COLOUR, CHANCE_COLOUR = "black", "#c0392b"


@dataclass(frozen=True)
class SeqBar:
    """One run in the SEQ figure: its SEQ, the SEQ of its Acc_traj 95 % interval, its Acc_traj and kind."""

    label: str
    kind: str  # "model", "baseline" or "ablation"
    seq: float
    acc_traj: float
    low: float | None = None
    high: float | None = None
    other_data: bool = False  # scored on other dialogues than the rest: drawn hollow


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_seq(bars: list[SeqBar], chance: float | None, path: Path) -> None:
    """Horizontal bars of SEQ, best on top, with 95 % intervals; baselines grey and hatched; median and chance lines."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.transforms import blended_transform_factory

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(12, max(3.6, 2.2 + 0.45 * len(bars))))
    ys = list(range(len(bars)))[::-1]
    for y, bar in zip(ys, bars):
        colour = KIND_COLOUR[bar.kind]
        edge = "#555555" if bar.kind == "baseline" else colour
        ax.barh(y, bar.seq - SEQ_MIN, left=SEQ_MIN, color="white" if bar.other_data else colour,
                hatch="//" if bar.kind == "baseline" else None, edgecolor=edge, linewidth=1.5 if bar.other_data else 1.0, height=0.7)
        # A marker at the value itself: a run at the floor (SEQ 40) has no bar to see.
        ax.plot([bar.seq], [y], marker="o", color=edge, markersize=4, zorder=3)
        if bar.low is not None and bar.high is not None:
            ax.errorbar([bar.seq], [y], xerr=[[bar.seq - bar.low], [bar.high - bar.seq]], fmt="none", ecolor="#333333",
                        elinewidth=0.9, capsize=3, zorder=4)
        # Values in a column right of the axes: inside, they collide with intervals and the median line.
        ax.text(1.01, y, f"{bar.seq:.1f}  (Acc_traj {bar.acc_traj:.2f})", va="center", fontsize=8,
                transform=blended_transform_factory(ax.transAxes, ax.transData))
    ax.set_yticks(ys, [b.label + KIND_MARK[b.kind] for b in bars], fontsize=8)
    handles = [Patch(facecolor=KIND_COLOUR[k], hatch="//" if k == "baseline" else None, edgecolor="#555555", label=text)
               for k, text in (("model", "model (cohort)"), ("baseline", "shortcut baseline †"), ("ablation", "ablation ‡"))
               if any(b.kind == k and not b.other_data for b in bars)]
    if any(b.other_data for b in bars):
        handles.append(Patch(facecolor="white", edgecolor=KIND_COLOUR["model"], linewidth=1.5, label="other dialogues ≠ (not comparable)"))
    ax.axvline(100, color=MEDIAN_COLOUR, linewidth=2.2, zorder=1)
    handles.append(Line2D([], [], color=MEDIAN_COLOUR, linewidth=2.2, label="cohort median (SEQ 100)"))
    if chance is not None:
        # Drawn on top, thin and dashed: still visible when it falls on the median line.
        ax.axvline(chance, color=CHANCE_COLOUR, linestyle=(0, (4, 3)), linewidth=1.2, zorder=5)
        same = abs(chance - 100) < 1.0
        handles.append(Line2D([], [], color=CHANCE_COLOUR, linestyle=(0, (4, 3)), linewidth=1.2,
                              label=f"chance, Acc_traj 0.25 (SEQ {chance:.0f}{', on the median' if same else ''})"))
    handles.append(Line2D([], [], color="#333333", marker="|", linestyle="none", markersize=8, label="95 % interval (bootstrap)"))
    ax.set_xlim(SEQ_MIN - 2, SEQ_MAX)
    ax.set_ylim(-0.6, len(bars) - 0.4)
    ax.set_xticks([40, 55, 70, 85, 100, 115, 130, 145, 160])
    ax.set_xlabel("SEQ (cohort median = 100, 15 per robust SD; clipped to 40–160)")
    # Below the axes: beside them sits the value column, and inside it would cover bars.
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, fontsize=8, frameon=False)
    ax.set_title("SpeechEQ: SEQ per run", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


def plot_heatmap(labels: list[str], slugs: list[str], values: list[list[float]], counts: list[list[int | None]], metric: str,
                 path: Path) -> None:
    """Runs x 15 subscales, composites marked; each cell gives its value and its number of dialogues; grey = none scored."""
    import numpy as np

    from speecheq_dataset.taxonomy import SUBSCALES

    data = np.array(values, dtype=float)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(12.5, 3.0 + 0.5 * len(labels)))
    vmin, vmax, cmap = (0.0, 1.0, "viridis") if metric == "acc_traj" else (SEQ_MIN, SEQ_MAX, "RdBu")
    colormap = plt.get_cmap(cmap).with_extremes(bad="#e6e6e6")
    image = ax.imshow(np.ma.masked_invalid(data), cmap=colormap, vmin=vmin, vmax=vmax, aspect="auto")
    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            n = counts[i][j]
            if math.isfinite(data[i, j]):
                level = (data[i, j] - vmin) / (vmax - vmin)
                dark = level < 0.55 if metric == "acc_traj" else abs(level - 0.5) > 0.3
                value = f"{data[i, j]:.2f}" if metric == "acc_traj" else f"{data[i, j]:.0f}"
                ax.text(j, i, f"{value}\nn={n}" if n is not None else value, ha="center", va="center", fontsize=6.5,
                        color="white" if dark else "black", linespacing=1.1)
            else:
                ax.text(j, i, "n=0", ha="center", va="center", fontsize=6.5, color="#777777")
    names = {s.slug: s.name for s in SUBSCALES}
    ax.set_xticks(range(len(slugs)), [names[s] for s in slugs], rotation=40, ha="right", fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    for boundary in range(3, len(slugs), 3):  # composites are three subscales each
        ax.axvline(boundary - 0.5, color="white", linewidth=2)
    composites = [SUBSCALES[i].composite.name for i in range(0, len(SUBSCALES), 3)]
    for index, name in enumerate(composites):
        ax.text(index * 3 + 1, -0.75, name, ha="center", va="bottom", fontsize=8, fontweight="bold")
    colorbar = fig.colorbar(image, ax=ax, fraction=0.025, pad=0.01)
    colorbar.set_label("Acc_traj" if metric == "acc_traj" else "SEQ within subscale", fontsize=8)
    title = "Acc_traj per subscale (chance 0.25)" if metric == "acc_traj" else "SEQ per subscale (within this set of runs)"
    ax.set_title(title, fontsize=11, pad=30)
    fig.text(0.01, 0.01, "n = dialogues scored in the cell; grey (n=0): the run scored no dialogue of that subscale.",
             fontsize=7.5, color="#555555")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, dpi=130)
    plt.close(fig)


def plot_deltas(series: list[tuple[str, list[float], float]], slugs: list[str], path: Path) -> None:
    """Direct minus sequential Acc2 per subscale, one bar series per (label, deltas, overall delta); says so when nothing changed."""
    import numpy as np

    from speecheq_dataset.taxonomy import SUBSCALES

    names = {s.slug: s.name for s in SUBSCALES}
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(12, 4.4))
    width = 0.8 / len(series)
    changed = False
    for k, (label, deltas, overall) in enumerate(series):
        xs = np.arange(len(slugs)) - 0.4 + width * (k + 0.5)
        finite = np.nan_to_num(np.array(deltas, dtype=float))
        changed |= bool(np.any(np.abs(finite) > 1e-12))
        ax.bar(xs, finite, width=width * 0.95, label=f"{label} (overall {overall:+.3f})")
    ax.axhline(0, color="black", linewidth=0.8)
    if not changed:
        # Bars of height 0 draw nothing: say what the empty axes mean.
        ax.set_ylim(-0.1, 0.1)
        ax.text(0.5, 0.62, "no change: direct inference gave the same turn-6 accuracy in every subscale", transform=ax.transAxes,
                ha="center", va="center", fontsize=10, color="#444444", bbox={"facecolor": "white", "edgecolor": "none"})
    ax.set_xticks(range(len(slugs)), [names[s] for s in slugs], rotation=40, ha="right", fontsize=8)
    for boundary in range(3, len(slugs), 3):
        ax.axvline(boundary - 0.5, color="#cccccc", linewidth=1)
    ax.set_ylabel("Acc2: direct − sequential")
    ax.set_title("Direct vs sequential inference: turn-6 accuracy gain when round 2 hears the resonant turn 4", fontsize=10)
    ax.legend(fontsize=8, frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
