"""`speecheq report RUN_DIR... --output-dir DIR`: cohort SEQ leaderboard and figures from several runs.

Reads each run directory's results.json (written by eval_scripts/run.py) and writes
- leaderboard.md / leaderboard.csv: Acc1, Acc2, Acc_all, Acc_traj, invalid rate, SEQ,
  with 95 % intervals; shortcut baselines in their own section;
- seq_per_model.png: SEQ per run with intervals, baselines marked, median and chance lines;
- subscale_heatmap.png: runs x 15 subscales (Acc_traj, or SEQ within each subscale), n per cell;
- sequential_vs_direct.png: direct minus sequential accuracy per subscale, for runs
  that differ only in `config.inference` (skipped, with a note, when there are none);
- report.json: the same numbers, the reference median/MAD and the notes.
The figures are drawn by report_figures.py.

Who sets the SEQ scale: the *cohort* is the model runs in the main setting
(runner.setting_deviations). Shortcut baselines (random, prosody) and ablation
runs are scored against the cohort's median and MAD without moving them, so
adding a baseline never shifts a model's SEQ; a cohort of one model, or with MAD
0, gives them no SEQ at all (it would say 40 or 160 about nothing).
`--reference-cohort FILE` scores every run against a frozen median/MAD instead
(SPEC §6); `--freeze-cohort FILE` writes this cohort's.

Runs scored on different dialogues (another dataset fingerprint, or another
number of dialogues) are never ranked silently: the leaderboard opens with a
warning and marks them.
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

from eval_scripts import report_figures  # noqa: E402
from eval_scripts.report_figures import KIND_MARK  # noqa: E402
from eval_scripts.report_figures import SeqBar  # noqa: E402
from speecheq_dataset.files import USER_MISTAKES  # noqa: E402
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
    seq_interval: tuple[float, float] | None = None  # SEQ of the Acc_traj 95 % interval's ends
    other_data: bool = False  # scored on other dialogues than most runs of the report
    seq: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def inference(self) -> str:
        return self.config.get("inference", "sequential")

    def metric(self, key: str) -> float:
        value = (self.metrics or {}).get(key)
        return float(value) if isinstance(value, (int, float)) else float("nan")

    def interval(self, key: str) -> tuple[float, float] | None:
        """The 95 % bootstrap interval of a metric, when results.json has one."""
        bounds = ((self.metrics or {}).get("ci95") or {}).get(key)
        return (float(bounds[0]), float(bounds[1])) if isinstance(bounds, list) and len(bounds) == 2 else None

    @property
    def data_key(self) -> tuple:
        """What identifies the dialogues a run was scored on."""
        return (self.dataset_fingerprint, (self.metrics or {}).get("n_dialogues"))


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
    from speecheq_metric import freeze_cohort

    notes: list[str] = []
    scored = [r for r in runs if r.metrics is not None and math.isfinite(r.metric("acc_traj"))]
    # A run scored on other dialogues is placed on the scale but does not set it.
    cohort_runs = [r for r in scored if r.kind == "model" and not r.other_data]
    if reference is None:
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
    outside = [r for r in scored if r not in cohort_runs]
    degenerate = reference.n_models < 2 or reference.mad == 0
    if degenerate and outside:
        notes.append(f"{', '.join(r.label for r in outside)}: no SEQ; against a cohort of one model, or with MAD 0, every "
                     "other run would land at 40 or 160 whatever its score. Compare Acc_traj instead.")
    for run in scored:
        if degenerate and run in outside:
            continue
        run.seq = _seq_of(run.metric("acc_traj"), reference)
        interval = run.interval("acc_traj")
        if interval is not None and reference.mad > 0:  # with MAD 0 every interval would span 40-160
            run.seq_interval = (_seq_of(interval[0], reference), _seq_of(interval[1], reference))
    return reference, notes


def _seq_of(acc_traj: float, reference) -> float:
    """SEQ of one Acc_traj on the reference's scale (monotone, so interval ends map to interval ends)."""
    from speecheq_metric import seq_scores

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # reported once in the notes instead
        return seq_scores({"x": acc_traj}, reference=reference)["x"]


def check_same_dialogues(runs: list[RunSummary]) -> list[str]:
    """Mark runs scored on other dialogues than the most common (fingerprint, n) group; returns the warnings."""
    scored = [r for r in runs if r.metrics is not None]
    groups: dict[tuple, list[RunSummary]] = {}
    for run in scored:
        groups.setdefault(run.data_key, []).append(run)
    if len(groups) <= 1:
        return []
    main_key = max(groups, key=lambda key: (len(groups[key]), key[1] or 0))
    warnings_ = []
    for key, members in groups.items():
        if key == main_key:
            continue
        for run in members:
            run.other_data = True
        fingerprint, n = key
        warnings_.append(f"{', '.join(r.label for r in members)}: scored on {n} dialogues of dataset {fingerprint}, "
                         f"not on the {main_key[1]} dialogues of dataset {main_key[0]} like the other runs; marked ≠, "
                         "not comparable.")
    return warnings_


def chance_seq(reference) -> float | None:
    """Where a chance-level Acc_traj (0.25) falls on this SEQ scale."""
    return None if reference is None else _seq_of(CHANCE["acc_traj"], reference)


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


def _interval_text(bounds: tuple[float, float] | None, digits: int) -> str:
    return "" if bounds is None else f" [{bounds[0]:.{digits}f}, {bounds[1]:.{digits}f}]"


def leaderboard_rows(runs: list[RunSummary]) -> list[dict]:
    """One flat row per run, best first (the CSV and report.json rows); `rank` counts models and ablations only."""
    rows = []
    rank = 0
    for run in sort_runs(runs):
        if run.kind != "baseline":
            rank += 1
        row = {"rank": rank if run.kind != "baseline" else None, "label": run.label, "kind": run.kind, "model": run.model,
               "preset": run.config.get("preset"), "inference": run.inference}
        for key, _ in METRIC_COLUMNS:
            row[key] = run.metric(key)
            bounds = run.interval(key)
            row[f"{key}_ci_low"], row[f"{key}_ci_high"] = bounds if bounds else (None, None)
        row["seq"] = run.seq
        row["seq_ci_low"], row["seq_ci_high"] = run.seq_interval if run.seq_interval and run.seq is not None else (None, None)
        row["n_dialogues"] = (run.metrics or {}).get("n_dialogues")
        row["dataset_fingerprint"] = run.dataset_fingerprint
        row["other_data"] = run.other_data
        row["run_dir"] = run.run_dir
        rows.append(row)
    return rows


def _table_line(row: dict, with_rank: bool) -> str:
    label = row["label"].replace("|", "\\|") + KIND_MARK[row["kind"]] + (" ≠" if row["other_data"] else "")
    cells = [str(row["rank"])] if with_rank else []
    cells.append(f"*{label}*" if row["kind"] == "baseline" else label)
    for key, _ in METRIC_COLUMNS:
        cell = _fmt(row[key])
        if key == "acc_traj":
            low, high = row["acc_traj_ci_low"], row["acc_traj_ci_high"]
            cell += _interval_text((low, high) if low is not None else None, 2)
        cells.append(cell)
    seq_low = row["seq_ci_low"]
    cells.append(_fmt(row["seq"], 1) + _interval_text((seq_low, row["seq_ci_high"]) if seq_low is not None else None, 0))
    cells.append(str(row["n_dialogues"] or "–"))
    return "| " + " | ".join(cells) + " |"


def leaderboard_markdown(rows: list[dict], notes: list[str], reference, figures: list[str], data_warnings: list[str]) -> str:
    """The Markdown leaderboard: warnings first, the ranked runs, the shortcut baselines, the legend and notes."""
    columns = "Acc1 | Acc2 | Acc_all | Acc_traj [95 % CI] | invalid | SEQ [95 % CI] | n |"
    lines = ["# SpeechEQ leaderboard", ""]
    if data_warnings:
        lines += ["> **Warning: these runs were not all scored on the same dialogues.** Rows marked ≠ are not comparable "
                  "with the others:", ">"]
        lines += [f"> - {warning}" for warning in data_warnings] + [""]
    lines += ["## Models", "", f"| # | model | {columns}", "|" + "---|" * 9]
    lines += [_table_line(row, True) for row in rows if row["kind"] != "baseline"]
    chance = chance_seq(reference)
    lines.append(f"| | *chance* | 0.500 | 0.500 | 0.500 | 0.250 | | {_fmt(chance, 1)} | |")
    baselines = [row for row in rows if row["kind"] == "baseline"]
    if baselines:
        lines += ["", "## Shortcut baselines", "",
                  "No weights and no understanding: random choice, or a fixed delivery rule such as \"pick the slower clip\". "
                  "In the published data delivery leaks the label (SPEC §9), so read every model's score against these rows.",
                  "", f"| model | {columns}", "|" + "---|" * 8]
        lines += [_table_line(row, False) for row in baselines]
    lines += [
        "",
        "Acc1 / Acc2: accuracy at turn 4 / turn 6; Acc_all: both decisions pooled; Acc_traj (primary): both turns right; "
        "invalid: unparseable or failed answers (counted wrong). Intervals: 95 % bootstrap over dialogues (SEQ: the "
        "interval's ends on the SEQ scale). SEQ = clip(100 + 15·z, 40, 160), z = (Acc_traj − median) / (1.4826·MAD) "
        "over the cohort (SPEC §6).",
        "",
        "† shortcut baseline. ‡ ablation (direct inference, text history, persona, oracle or another prompt): scored on the "
        "cohort's scale, not part of it. ≠ scored on other dialogues than the rest.",
        "",
        "## Notes",
        "",
    ]
    lines += [f"- {note}" for note in notes]
    if figures:
        lines += ["", "## Figures", ""] + [f"![{name}]({name})" for name in figures]
    return "\n".join(lines) + "\n"


def write_csv(rows: list[dict], path: Path) -> None:
    columns = ["rank", "label", "kind", "model", "preset", "inference"]
    for key, _ in METRIC_COLUMNS:
        columns += [key, f"{key}_ci_low", f"{key}_ci_high"]
    columns += ["seq", "seq_ci_low", "seq_ci_high", "n_dialogues", "dataset_fingerprint", "other_data", "run_dir"]
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if row[k] is None or (isinstance(row[k], float) and not math.isfinite(row[k])) else row[k])
                             for k in columns})


# -- figures: the data each one shows (report_figures.py draws it) ---------------

def seq_bars(runs: list[RunSummary]) -> list[SeqBar]:
    """The runs with a SEQ, best first."""
    return [SeqBar(r.label + (" ≠" if r.other_data else ""), r.kind, r.seq, r.metric("acc_traj"),
                   *(r.seq_interval if r.seq_interval else (None, None)), other_data=r.other_data)
            for r in sort_runs(runs) if r.seq is not None]


def subscale_counts(runs: list[RunSummary], slugs: list[str]) -> list[list[int | None]]:
    """Dialogues scored per run and subscale (0 where none)."""
    return [[int((run.per_subscale.get(slug) or {}).get("n_dialogues") or 0) if run.per_subscale.get(slug) else 0 for slug in slugs]
            for run in runs]


def delta_series(pairs: list[tuple[RunSummary, RunSummary]], slugs: list[str]) -> list[tuple[str, list[float], float]]:
    """(label, direct − sequential Acc2 per subscale, overall Acc2 delta) per pair (direct inference only changes round 2)."""
    nan = float("nan")
    return [(seq_run.label,
             [(direct_run.per_subscale.get(s) or {}).get("acc_turn6", nan) - (seq_run.per_subscale.get(s) or {}).get("acc_turn6", nan)
              for s in slugs],
             direct_run.metric("acc_turn6") - seq_run.metric("acc_turn6"))
            for seq_run, direct_run in pairs]


def draw_figures(runs: list[RunSummary], reference, heatmap_metric: str, out: Path, notes: list[str]) -> list[str]:
    """Write every figure that has something to show; returns their file names (and adds notes)."""
    from speecheq_dataset.taxonomy import SUBSCALE_SLUGS

    figures = []
    bars = seq_bars(runs)
    if bars:
        report_figures.plot_seq(bars, chance_seq(reference), out / FIGURE_SEQ)
        figures.append(FIGURE_SEQ)
    shown = [r for r in sort_runs(runs) if r.per_subscale]
    if shown:
        slugs, matrix = subscale_matrix(shown, heatmap_metric)
        labels = [r.label + KIND_MARK[r.kind] + (" ≠" if r.other_data else "") for r in shown]
        report_figures.plot_heatmap(labels, slugs, matrix, subscale_counts(shown, slugs), heatmap_metric, out / FIGURE_HEATMAP)
        figures.append(FIGURE_HEATMAP)
    pairs = direct_pairs(runs)
    if pairs:
        report_figures.plot_deltas(delta_series(pairs, list(SUBSCALE_SLUGS)), list(SUBSCALE_SLUGS), out / FIGURE_DELTAS)
        figures.append(FIGURE_DELTAS)
        for seq_run, direct_run in pairs:
            notes.append(f"{seq_run.label}: direct inference changes Acc2 by {direct_run.metric('acc_turn6') - seq_run.metric('acc_turn6'):+.3f} "
                         f"and Acc_traj by {direct_run.metric('acc_traj') - seq_run.metric('acc_traj'):+.3f}.")
    else:
        message = "No pair of runs differing only in --inference (sequential vs direct): the delta figure is skipped."
        logger.info(message)
        notes.append(message)
    return figures


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
    data_warnings = check_same_dialogues(runs)
    reference, notes = assign_seq(runs, reference)
    for run in runs:
        notes += [f"{run.label}: {note}" for note in run.notes]
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    for name in (FIGURE_SEQ, FIGURE_HEATMAP, FIGURE_DELTAS):  # an earlier report's figure must not outlive it
        (out / name).unlink(missing_ok=True)
    figures = draw_figures(runs, reference, heatmap_metric, out, notes)
    if freeze_file and reference is not None:
        # Before the leaderboard and report.json, so their notes mention it too.
        Path(freeze_file).write_text(json.dumps(reference.to_dict(), indent=2) + "\n")
        notes.append(f"reference cohort written to {freeze_file}")
    rows = leaderboard_rows(runs)
    (out / "leaderboard.md").write_text(leaderboard_markdown(rows, notes, reference, figures, data_warnings))
    write_csv(rows, out / "leaderboard.csv")
    report = {
        "rows": [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()} for row in rows],
        "reference_cohort": reference.to_dict() if reference is not None else None,
        "chance_seq": chance_seq(reference),
        "heatmap_metric": heatmap_metric,
        "figures": figures,
        "data_warnings": data_warnings,
        "notes": notes,
    }
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    for note in data_warnings + [n for n in notes if n.startswith("Warning")]:
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
    except USER_MISTAKES as exc:
        print(f"speecheq report: error: {exc}", file=sys.stderr)
        return 2
    print((Path(args.output_dir) / "leaderboard.md").read_text())
    print(f"wrote {args.output_dir}: leaderboard.md, leaderboard.csv, report.json, {', '.join(report['figures'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
