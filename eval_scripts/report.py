"""`speecheq report RUN_DIR... --output-dir DIR`: cohort SEQ leaderboard and figures from several runs.

Reads each run directory's results.json (written by eval_scripts/run.py) and writes
- leaderboard.md / leaderboard.csv: Acc1, Acc2, Acc_all, Acc_traj, invalid rate, SEQ;
- seq_per_model.png: SEQ per run, shortcut baselines marked, chance line;
- subscale_heatmap.png: runs x 15 subscales (Acc_traj, or SEQ within each subscale);
- sequential_vs_direct.png: direct minus sequential accuracy per subscale, for runs
  that differ only in `config.inference` (skipped, with a note, when there are none);
- report.json: the same numbers, the reference median/MAD and the notes.

Who sets the SEQ scale: the *cohort* is the model runs in the main setting
(sequential inference, audio history, default persona, no oracle). Shortcut
baselines (random, prosody) and ablation runs are scored against the cohort's
median and MAD without moving them, so adding a baseline never shifts a
model's SEQ. `--reference-cohort FILE` scores every run against a frozen
median/MAD instead (SPEC §6); `--freeze-cohort FILE` writes this cohort's.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

try:  # run as a script from an uninstalled checkout
    import eval_scripts  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_scripts.runner import RunConfig  # noqa: E402
from eval_scripts.runner import setting_deviations  # noqa: E402

logger = logging.getLogger("eval_scripts.report")

BASELINE_MODELS = frozenset({"random", "prosody"})
METRIC_COLUMNS = (("acc_turn4", "Acc1"), ("acc_turn6", "Acc2"), ("acc_all", "Acc_all"), ("acc_traj", "Acc_traj"), ("invalid_rate", "invalid"))
CHANCE = {"acc_turn4": 0.5, "acc_turn6": 0.5, "acc_all": 0.5, "acc_traj": 0.25}
FIGURE_SEQ = "seq_per_model.png"
FIGURE_HEATMAP = "subscale_heatmap.png"
FIGURE_DELTAS = "sequential_vs_direct.png"
# Every file a report writes into its output folder (replacing any of them needs overwrite).
REPORT_FILES = ("leaderboard.md", "leaderboard.csv", "report.json", FIGURE_SEQ, FIGURE_HEATMAP, FIGURE_DELTAS)


@dataclass
class RunSummary:
    """What the report needs from one run directory."""

    run_dir: str
    label: str
    model: str
    config: dict
    metrics: dict | None
    per_subscale: dict
    kind: str = "model"  # "model" (in the SEQ cohort), "baseline" or "ablation"
    dataset_fingerprint: str | None = None
    seq: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def inference(self) -> str:
        return self.config.get("inference", "sequential")

    def metric(self, key: str) -> float:
        value = (self.metrics or {}).get(key)
        return float(value) if isinstance(value, (int, float)) else float("nan")


def run_kind(model_name: str, config: dict) -> str:
    """baseline for shortcut adapters, ablation for non-default protocol settings, else model."""
    if model_name in BASELINE_MODELS:
        return "baseline"
    return "ablation" if setting_deviations(config) else "model"


def load_run(path: str | Path) -> RunSummary:
    """A run directory (or its results.json); errors name the file."""
    path = Path(path)
    results_file = path if path.is_file() else path / "results.json"
    if not results_file.is_file():
        raise FileNotFoundError(f"{results_file}: no results.json (is {path} a run directory of eval_scripts/run.py?)")
    try:
        results = json.loads(results_file.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{results_file}: not valid JSON ({exc})") from None
    for key in ("config", "metrics"):
        if key not in results:
            raise ValueError(f"{results_file}: missing key {key!r}")
    config = results["config"] or {}
    description = results.get("model") or {}
    model_name = description.get("name") if isinstance(description, dict) else None
    model_name = model_name or config.get("model") or "?"
    label = results.get("label") or (description.get("label") if isinstance(description, dict) else None) or model_name
    summary = RunSummary(
        run_dir=str(results_file.parent),
        label=str(label),
        model=str(model_name),
        config=config,
        metrics=results["metrics"],
        per_subscale=results.get("per_subscale") or {},
        kind=run_kind(str(model_name), config),
        dataset_fingerprint=results.get("dataset_fingerprint"),
    )
    if summary.metrics is None:
        summary.notes.append("no dialogue scored")
    return summary


def _unique_labels(runs: list[RunSummary]) -> None:
    """Give runs that share a label a suffix from their directory, so rows and SEQ keys stay distinct."""
    seen: dict[str, int] = {}
    for run in runs:
        seen[run.label] = seen.get(run.label, 0) + 1
    for run in runs:
        if seen[run.label] > 1:
            run.label = f"{run.label} ({Path(run.run_dir).name})"


def read_reference(path: str | Path):
    """A frozen reference cohort from JSON: {median, mad, n_models[, k]} or a seq_report-like {"reference": {...}}."""
    from speecheq_metric import ReferenceCohort

    data = json.loads(Path(path).read_text())
    if isinstance(data, dict) and "reference" in data:
        data = data["reference"]
    try:
        return ReferenceCohort.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: not a reference cohort (needs median, mad, n_models): {exc}") from None


def assign_seq(runs: list[RunSummary], reference=None) -> tuple[object, list[str]]:
    """Fill run.seq; returns (the reference median/MAD used, notes for the report)."""
    from speecheq_metric import freeze_cohort, seq_scores

    notes: list[str] = []
    scored = [r for r in runs if r.metrics is not None and math.isfinite(r.metric("acc_traj"))]
    if reference is None:
        cohort_runs = [r for r in scored if r.kind == "model"]
        if not cohort_runs:
            cohort_runs = scored
            if scored:
                notes.append("No model run in the main setting: SEQ is computed within all runs, baselines included.")
        if not cohort_runs:
            notes.append("No run has scored dialogues: no SEQ.")
            return None, notes
        cohort = {r.label: r.metric("acc_traj") for r in cohort_runs}
        reference = freeze_cohort(cohort)
        notes.append(f"SEQ cohort: {len(cohort)} run(s) ({', '.join(cohort)}); median Acc_traj {reference.median:.4f}, "
                     f"MAD {reference.mad:.4f}. Other runs are scored against this median/MAD without changing it.")
    else:
        notes.append(f"SEQ against the frozen reference cohort: median {reference.median:.4f}, MAD {reference.mad:.4f}, "
                     f"{reference.n_models} models.")
    if reference.n_models < 3:
        notes.append(f"Warning: the SEQ cohort has {reference.n_models} model(s); median and MAD of fewer than 3 are not meaningful.")
    if reference.mad == 0:
        notes.append("The cohort's MAD is 0: SEQ is 100 at the median, 160 above it, 40 below it (SPEC §6).")
    if scored:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # reported once in the notes instead
            seqs = seq_scores({r.label: r.metric("acc_traj") for r in scored}, reference=reference)
        for run in scored:
            run.seq = seqs[run.label]
    return reference, notes


def chance_seq(reference) -> float | None:
    """Where a chance-level Acc_traj (0.25) falls on this SEQ scale."""
    if reference is None:
        return None
    from speecheq_metric import seq_scores

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return seq_scores({"chance": CHANCE["acc_traj"]}, reference=reference)["chance"]


def sort_runs(runs: list[RunSummary]) -> list[RunSummary]:
    """Best first by SEQ (then Acc_traj); runs without a score last."""
    def key(run: RunSummary):
        seq = run.seq if run.seq is not None else -math.inf
        traj = run.metric("acc_traj")
        return (-seq, -(traj if math.isfinite(traj) else -1.0), run.label)

    return sorted(runs, key=key)


def direct_pairs(runs: list[RunSummary]) -> list[tuple[RunSummary, RunSummary]]:
    """(sequential, direct) runs of the same model, settings and dialogues, differing only in config.inference."""
    neutral = RunConfig.answer_neutral_keys()

    def experiment(run: RunSummary) -> str:
        rest = {k: v for k, v in run.config.items() if k not in neutral and k != "inference"}
        same_dialogues = (run.dataset_fingerprint, run.metric("n_dialogues"))
        return json.dumps([rest, same_dialogues], sort_keys=True, default=str)

    sequential = {experiment(r): r for r in runs if r.inference == "sequential" and r.metrics is not None}
    pairs = []
    for run in runs:
        if run.inference == "direct" and run.metrics is not None and experiment(run) in sequential:
            pairs.append((sequential[experiment(run)], run))
    return pairs


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:.{digits}f}"


KIND_MARK = {"model": "", "baseline": " †", "ablation": " ‡"}


def leaderboard_rows(runs: list[RunSummary]) -> list[dict]:
    """One flat row per run, best first (the CSV and report.json rows)."""
    rows = []
    for rank, run in enumerate(sort_runs(runs), start=1):
        row = {"rank": rank, "label": run.label, "kind": run.kind, "model": run.model, "inference": run.inference}
        for key, _ in METRIC_COLUMNS:
            row[key] = run.metric(key)
        row["seq"] = run.seq
        row["n_dialogues"] = (run.metrics or {}).get("n_dialogues")
        row["run_dir"] = run.run_dir
        rows.append(row)
    return rows


def leaderboard_markdown(rows: list[dict], notes: list[str], reference, figures: list[str]) -> str:
    """The Markdown leaderboard with its legend and notes."""
    header = "| # | model | Acc1 | Acc2 | Acc_all | Acc_traj | invalid | SEQ | n |"
    lines = ["# SpeechEQ leaderboard", "", header, "|" + "---|" * 9]
    for row in rows:
        label = row["label"].replace("|", "\\|") + KIND_MARK[row["kind"]]
        if row["kind"] == "baseline":
            label = f"*{label}*"
        cells = [str(row["rank"]), label] + [_fmt(row[k]) for k, _ in METRIC_COLUMNS] + [_fmt(row["seq"], 1), str(row["n_dialogues"] or "–")]
        lines.append("| " + " | ".join(cells) + " |")
    chance = chance_seq(reference)
    lines.append(f"| | *chance* | 0.500 | 0.500 | 0.500 | 0.250 | | {_fmt(chance, 1)} | |")
    lines += [
        "",
        "Acc1 / Acc2: accuracy at turn 4 / turn 6; Acc_all: both decisions pooled; Acc_traj (primary): both turns right; "
        "invalid: unparseable or failed answers (counted wrong). SEQ = clip(100 + 15·z, 40, 160), "
        "z = (Acc_traj − median) / (1.4826·MAD) over the cohort (SPEC §6).",
        "",
        "† shortcut baseline: no weights and no understanding (random choice, or a fixed delivery rule such as "
        "\"pick the slower clip\"). In the published data delivery leaks the label (SPEC §9), so read every model's "
        "score against these rows. ‡ ablation (direct inference, text history, persona, oracle or another prompt): "
        "scored on the cohort's scale, not part of it.",
        "",
        "## Notes",
        "",
    ]
    lines += [f"- {note}" for note in notes]
    if figures:
        lines += ["", "## Figures", ""] + [f"![{name}]({name})" for name in figures]
    return "\n".join(lines) + "\n"


def write_csv(rows: list[dict], path: Path) -> None:
    columns = ["rank", "label", "kind", "model", "inference", *[k for k, _ in METRIC_COLUMNS], "seq", "n_dialogues", "run_dir"]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if isinstance(row[k], float) and not math.isfinite(row[k]) else row[k]) for k in columns})


# -- figures -----------------------------------------------------------------

KIND_COLOUR = {"model": "#2f6db5", "baseline": "#9a9a9a", "ablation": "#8fb7e3"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_seq(runs: list[RunSummary], reference, path: Path) -> bool:
    """Horizontal bars of SEQ per run, best on top; baselines grey and hatched; median and chance lines."""
    scored = [r for r in sort_runs(runs) if r.seq is not None]
    if not scored:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10.5, max(2.6, 1.2 + 0.42 * len(scored))))
    ys = list(range(len(scored)))[::-1]
    for y, run in zip(ys, scored):
        ax.barh(y, run.seq - 40, left=40, color=KIND_COLOUR[run.kind], hatch="//" if run.kind == "baseline" else None,
                edgecolor="#555555" if run.kind == "baseline" else KIND_COLOUR[run.kind], height=0.7)
        ax.text(run.seq + 1.5, y, f"{run.seq:.1f}  (Acc_traj {run.metric('acc_traj'):.2f})", va="center", fontsize=8)
    ax.set_yticks(ys, [r.label + KIND_MARK[r.kind] for r in scored], fontsize=8)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    ax.axvline(100, color="black", linewidth=0.8)
    handles = [Patch(facecolor=KIND_COLOUR[k], hatch="//" if k == "baseline" else None, edgecolor="#555555", label=text)
               for k, text in (("model", "model (cohort)"), ("baseline", "shortcut baseline †"), ("ablation", "ablation ‡"))
               if any(r.kind == k for r in scored)]
    handles.append(Line2D([], [], color="black", linewidth=0.8, label="cohort median (100)"))
    chance = chance_seq(reference)
    if chance is not None:
        ax.axvline(chance, color="#c0392b", linestyle="--", linewidth=1)
        handles.append(Line2D([], [], color="#c0392b", linestyle="--", label=f"chance, Acc_traj 0.25 ({chance:.0f})"))
    ax.set_xlim(40, 185)
    ax.set_ylim(-0.6, len(scored) - 0.4)
    ax.set_xlabel("SEQ (cohort median = 100, 15 per robust SD; clipped to 40–160)")
    # Outside the axes: inside, it covers the value labels of the lowest bars.
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    ax.set_title("SpeechEQ: SEQ per run", fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return True


def subscale_matrix(runs: list[RunSummary], metric: str) -> tuple[list[str], list[list[float]]]:
    """(subscale slugs in taxonomy order, rows of values per run) for the heatmap; NaN where a run lacks a subscale."""
    from speecheq_dataset.taxonomy import SUBSCALES

    slugs = [s.slug for s in SUBSCALES]
    if metric == "acc_traj":
        matrix = [[float((run.per_subscale.get(slug) or {}).get("acc_traj", float("nan"))) for slug in slugs] for run in runs]
        return slugs, matrix
    from speecheq_metric import seq_per_subscale

    cohort = {run.label: {slug: v["acc_traj"] for slug, v in run.per_subscale.items() if v and v.get("acc_traj") is not None}
              for run in runs}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        per = seq_per_subscale(cohort)
    return slugs, [[per.get(slug, {}).get(run.label, float("nan")) for slug in slugs] for run in runs]


def plot_heatmap(runs: list[RunSummary], metric: str, path: Path) -> bool:
    """Runs x 15 subscales, composites marked; cell text gives the value."""
    import numpy as np

    from speecheq_dataset.taxonomy import SUBSCALES

    shown = [r for r in sort_runs(runs) if r.per_subscale]
    if not shown:
        return False
    slugs, matrix = subscale_matrix(shown, metric)
    values = np.array(matrix, dtype=float)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(12, 2.6 + 0.45 * len(shown)))
    vmin, vmax, cmap = (0.0, 1.0, "viridis") if metric == "acc_traj" else (40.0, 160.0, "RdBu")
    masked = np.ma.masked_invalid(values)
    colormap = plt.get_cmap(cmap).with_extremes(bad="#e6e6e6")
    image = ax.imshow(masked, cmap=colormap, vmin=vmin, vmax=vmax, aspect="auto")
    for i in range(values.shape[0]):
        for j in range(values.shape[1]):
            if math.isfinite(values[i, j]):
                level = (values[i, j] - vmin) / (vmax - vmin)
                dark = level < 0.55 if metric == "acc_traj" else abs(level - 0.5) > 0.3
                ax.text(j, i, f"{values[i, j]:.2f}" if metric == "acc_traj" else f"{values[i, j]:.0f}", ha="center", va="center",
                        fontsize=7, color="white" if dark else "black")
    names = {s.slug: s.name for s in SUBSCALES}
    ax.set_xticks(range(len(slugs)), [names[s] for s in slugs], rotation=40, ha="right", fontsize=8)
    ax.set_yticks(range(len(shown)), [r.label + KIND_MARK[r.kind] for r in shown], fontsize=8)
    for boundary in range(3, len(slugs), 3):  # composites are three subscales each
        ax.axvline(boundary - 0.5, color="white", linewidth=2)
    composites = [SUBSCALES[i].composite.name for i in range(0, len(SUBSCALES), 3)]
    for index, name in enumerate(composites):
        ax.text(index * 3 + 1, -0.75, name, ha="center", va="bottom", fontsize=8, fontweight="bold")
    colorbar = fig.colorbar(image, ax=ax, fraction=0.025, pad=0.01)
    colorbar.set_label("Acc_traj" if metric == "acc_traj" else "SEQ within subscale", fontsize=8)
    title = "Acc_traj per subscale (chance 0.25)" if metric == "acc_traj" else "SEQ per subscale (within this set of runs)"
    ax.set_title(title, fontsize=11, pad=22)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return True


def plot_deltas(pairs: list[tuple[RunSummary, RunSummary]], path: Path) -> bool:
    """Direct minus sequential Acc2 per subscale, one bar series per model (direct inference only changes round 2)."""
    import numpy as np

    from speecheq_dataset.taxonomy import SUBSCALES

    if not pairs:
        return False
    slugs = [s.slug for s in SUBSCALES]
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(12, 4.2))
    width = 0.8 / len(pairs)
    for k, (seq_run, direct_run) in enumerate(pairs):
        deltas = [(direct_run.per_subscale.get(s) or {}).get("acc_turn6", float("nan")) - (seq_run.per_subscale.get(s) or {}).get("acc_turn6", float("nan"))
                  for s in slugs]
        overall = direct_run.metric("acc_turn6") - seq_run.metric("acc_turn6")
        xs = np.arange(len(slugs)) - 0.4 + width * (k + 0.5)
        ax.bar(xs, np.nan_to_num(deltas), width=width * 0.95, label=f"{seq_run.label} (overall {overall:+.3f})")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(slugs)), [s.name for s in SUBSCALES], rotation=40, ha="right", fontsize=8)
    for boundary in range(3, len(slugs), 3):
        ax.axvline(boundary - 0.5, color="#cccccc", linewidth=1)
    ax.set_ylabel("Acc2: direct − sequential")
    ax.set_title("Direct vs sequential inference: turn-6 accuracy gain when round 2 hears the resonant turn 4", fontsize=10)
    ax.legend(fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return True


# -- entry point ---------------------------------------------------------------

def check_output(out: Path, freeze_file: str | None, overwrite: bool) -> None:
    """Refuse to replace an earlier report's files (or the freeze file) without `overwrite`."""
    existing = [name for name in REPORT_FILES if (out / name).exists()]
    if freeze_file and Path(freeze_file).exists():
        existing.append(str(freeze_file))
    if existing and not overwrite:
        raise ValueError(f"{out} already holds report files ({', '.join(existing)}); pass --overwrite to replace them")


def build_report(run_dirs: list[str], output_dir: str | Path, *, reference_file: str | None = None,
                 freeze_file: str | None = None, heatmap_metric: str = "acc_traj", overwrite: bool = False) -> dict:
    """Load runs, compute SEQ, write leaderboard.md/.csv, report.json and the figures; returns report.json's content."""
    if not run_dirs:
        raise ValueError("no run directories given")
    check_output(Path(output_dir), freeze_file, overwrite)
    runs = [load_run(d) for d in run_dirs]
    _unique_labels(runs)
    reference = read_reference(reference_file) if reference_file else None
    reference, notes = assign_seq(runs, reference)
    for run in runs:
        notes += [f"{run.label}: {note}" for note in run.notes]
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in (FIGURE_SEQ, FIGURE_HEATMAP, FIGURE_DELTAS):  # an earlier report's figure must not outlive it
        (out / name).unlink(missing_ok=True)
    figures = []
    if plot_seq(runs, reference, out / FIGURE_SEQ):
        figures.append(FIGURE_SEQ)
    if plot_heatmap(runs, heatmap_metric, out / FIGURE_HEATMAP):
        figures.append(FIGURE_HEATMAP)
    pairs = direct_pairs(runs)
    if plot_deltas(pairs, out / FIGURE_DELTAS):
        figures.append(FIGURE_DELTAS)
        for seq_run, direct_run in pairs:
            notes.append(f"{seq_run.label}: direct inference changes Acc2 by {direct_run.metric('acc_turn6') - seq_run.metric('acc_turn6'):+.3f} "
                         f"and Acc_traj by {direct_run.metric('acc_traj') - seq_run.metric('acc_traj'):+.3f}.")
    else:
        message = "No pair of runs differing only in --inference (sequential vs direct): the delta figure is skipped."
        logger.info(message)
        notes.append(message)
    if freeze_file and reference is not None:
        # Before the leaderboard and report.json, so their notes mention it too.
        Path(freeze_file).write_text(json.dumps(reference.to_dict(), indent=2) + "\n")
        notes.append(f"reference cohort written to {freeze_file}")
    rows = leaderboard_rows(runs)
    (out / "leaderboard.md").write_text(leaderboard_markdown(rows, notes, reference, figures))
    write_csv(rows, out / "leaderboard.csv")
    report = {
        "rows": [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()} for row in rows],
        "reference_cohort": reference.to_dict() if reference is not None else None,
        "chance_seq": chance_seq(reference),
        "heatmap_metric": heatmap_metric,
        "figures": figures,
        "notes": notes,
    }
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    for note in notes:
        if note.startswith("Warning"):
            logger.warning(note)
    return report


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="speecheq report", description="Cohort SEQ leaderboard (Markdown, CSV) and figures (PNG) from run directories.")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="run directories of eval_scripts/run.py (each holds results.json)")
    p.add_argument("--output-dir", required=True, help="where leaderboard.md, leaderboard.csv, report.json and the PNGs go")
    p.add_argument("--reference-cohort", default=None, help="JSON with a frozen median/MAD (SPEC §6) to score every run against")
    p.add_argument("--freeze-cohort", default=None, help="write this report's cohort median/MAD as JSON, for later --reference-cohort")
    p.add_argument("--heatmap-metric", choices=("acc_traj", "seq"), default="acc_traj", help="value shown per subscale")
    p.add_argument("--overwrite", action="store_true", help="replace the report files an earlier report left in --output-dir")
    return p


def main(argv: list[str] | None = None) -> int:
    """CLI entry point: 0 on success, 2 on bad input (the message names the file)."""
    args = build_parser().parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        report = build_report(args.run_dirs, args.output_dir, reference_file=args.reference_cohort,
                              freeze_file=args.freeze_cohort, heatmap_metric=args.heatmap_metric, overwrite=args.overwrite)
    except (FileNotFoundError, ValueError) as exc:
        print(f"speecheq report: error: {exc}", file=sys.stderr)
        return 2
    print((Path(args.output_dir) / "leaderboard.md").read_text())
    print(f"wrote {args.output_dir}: leaderboard.md, leaderboard.csv, report.json, {', '.join(report['figures'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
