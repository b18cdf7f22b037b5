"""The human check (SPEC §4): a stratified annotation sheet, two annotators, pass rates and Cohen's kappa.

`speecheq human-check export RAW_DIR SHEET.csv` samples k dialogues per
subscale (default 5, seeded) into a CSV with the transcripts, tone
instructions, clip paths and five empty criteria columns (1 = pass, 0 = fail).
`speecheq human-check import SHEET_A.csv SHEET_B.csv --out EXCLUDE.json`
reads two annotators' copies, reports each criterion's pass rates and Cohen's
kappa, and lists every dialogue that either annotator failed on any criterion;
`speecheq publish --exclusions EXCLUDE.json` leaves those out of the export.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import random
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from speecheq_dataset.files import exit_status
from speecheq_dataset.files import write_bytes_atomic

CRITERIA: tuple[str, ...] = ("text_quality", "audio_quality", "eq_relevance_text", "eq_relevance_audio", "answer_correctness")
CRITERIA_HELP = {
    "text_quality": "the transcript reads as natural, coherent speech",
    "audio_quality": "every clip is intelligible and free of artefacts",
    "eq_relevance_text": "the scenario and lines test the named EQ subscale",
    "eq_relevance_audio": "the deliveries carry the intended emotions",
    "answer_correctness": "the _high clip is the socially resonant one at turns 4 and 6 (paralinguistic accuracy)",
}
DEFAULT_PER_SUBSCALE = 5


def cohen_kappa(a: list[int], b: list[int]) -> float:
    """Cohen's kappa of two raters' binary labels (1.0 when both give the same single label to everything, where chance agreement is 1)."""
    if len(a) != len(b) or not a:
        raise ValueError(f"cohen_kappa: need two equally long, non-empty label lists, got {len(a)} and {len(b)}")
    n = len(a)
    observed = sum(x == y for x, y in zip(a, b)) / n
    pa, pb = sum(a) / n, sum(b) / n
    expected = pa * pb + (1 - pa) * (1 - pb)
    if expected == 1.0:  # both raters constant and equal: perfect agreement, the formula's 0/0
        return 1.0
    return (observed - expected) / (1 - expected)


def sample_dialogues(entries: list[dict], per_subscale: int, seed: int) -> list[dict]:
    """k entries per subscale (all when fewer), seeded, in subscale then id order."""
    by_subscale: dict[str, list[dict]] = defaultdict(list)
    for entry in entries:
        by_subscale[entry["subscale"]].append(entry)
    rng = random.Random(seed)
    out = []
    for subscale in sorted(by_subscale):
        group = sorted(by_subscale[subscale], key=lambda e: e["dataset_id"])
        out += sorted(rng.sample(group, min(per_subscale, len(group))), key=lambda e: e["dataset_id"])
    return out


def _entries(raw_dir: Path) -> list[dict]:
    from speecheq_dataset.raw import RawDialogueError
    from speecheq_dataset.raw import find_dialogue_folders
    from speecheq_dataset.raw import read_dialogue

    out = []
    for folder in find_dialogue_folders(raw_dir):
        try:
            d = read_dialogue(folder, decode=False)
        except RawDialogueError:
            continue  # a faulty folder is not annotated; the build rejects it anyway
        f = d.fields
        entry = {"dataset_id": d.id, "subscale": f["subscale"], "scenario_valence": f["scenario_valence"] or "", "title": f.get("title") or "",
                 "context": f.get("context") or "", "description": f.get("description") or ""}
        entry.update({f"turn{n}_text": f[f"turn{n}_text"] for n in range(1, 7)})
        for column, path in zip(("turn4_tone_high", "turn4_tone_low", "turn6_tone_high", "turn6_tone_low"),
                                (d.clip_paths[3], d.clip_paths[4], d.clip_paths[6], d.clip_paths[7])):
            entry[column] = f[column]
            entry[column.replace("_tone_", "_clip_")] = str(path.resolve())
        entry["folder"] = str(folder.resolve())
        out.append(entry)
    return out


SHEET_INFO = ("dataset_id", "subscale", "scenario_valence", "title", "context", "description", *(f"turn{n}_text" for n in range(1, 7)),
              "turn4_tone_high", "turn4_tone_low", "turn6_tone_high", "turn6_tone_low",
              "turn4_clip_high", "turn4_clip_low", "turn6_clip_high", "turn6_clip_low", "folder")


def export_sheet(raw_dir: Path | str, sheet: Path | str, *, per_subscale: int = DEFAULT_PER_SUBSCALE, seed: int = 0,
                 overwrite: bool = False) -> int:
    """Write the annotation sheet; returns the number of dialogues in it."""
    sheet = Path(sheet)
    if sheet.exists() and not overwrite:  # it may already hold an annotator's marks
        raise ValueError(f"{sheet} exists (it may hold annotations); pass --overwrite to replace it with a blank sheet")
    chosen = sample_dialogues(_entries(Path(raw_dir)), per_subscale, seed)
    if not chosen:
        raise ValueError(f"{raw_dir}: no valid dialogues to annotate")
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=[*SHEET_INFO, *CRITERIA, "notes"])
    writer.writeheader()
    for entry in chosen:
        writer.writerow({**entry, **{c: "" for c in CRITERIA}, "notes": ""})
    sheet.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(sheet, text.getvalue().encode("utf-8"))
    return len(chosen)


def read_sheet(path: Path | str) -> dict[str, dict[str, int]]:
    """dataset_id -> criterion -> 1/0 from a filled sheet; a blank or other value fails naming row and column."""
    out = {}
    with Path(path).open(newline="", encoding="utf-8") as lines:
        reader = csv.DictReader(lines)
        missing = [c for c in ("dataset_id", *CRITERIA) if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: sheet lacks column(s) {missing}")
        for number, row in enumerate(reader, start=2):
            labels = {}
            for criterion in CRITERIA:
                value = (row[criterion] or "").strip().lower()
                if value in ("1", "pass", "yes", "y", "true"):
                    labels[criterion] = 1
                elif value in ("0", "fail", "no", "n", "false"):
                    labels[criterion] = 0
                else:
                    raise ValueError(f"{path} line {number}: {criterion} is {row[criterion]!r}; write 1 (pass) or 0 (fail)")
            out[row["dataset_id"]] = labels
    return out


@dataclass(frozen=True)
class HumanCheck:
    n_dialogues: int
    pass_rates: dict[str, tuple[float, float]]  # criterion -> (annotator A, annotator B)
    kappa: dict[str, float]  # per criterion and "pooled"
    excluded: dict[str, list[str]]  # dataset_id -> failed criteria (with who failed them)


def compare(a: dict[str, dict[str, int]], b: dict[str, dict[str, int]]) -> HumanCheck:
    """Pass rates, Cohen's kappa per criterion and pooled, and the dialogues to exclude (any failure by anyone)."""
    if set(a) != set(b):
        raise ValueError(f"the two sheets annotate different dialogues: only in A {sorted(set(a) - set(b))[:5]}, "
                         f"only in B {sorted(set(b) - set(a))[:5]}")
    ids = sorted(a)
    rates, kappa, pooled_a, pooled_b = {}, {}, [], []
    for criterion in CRITERIA:
        la, lb = [a[i][criterion] for i in ids], [b[i][criterion] for i in ids]
        rates[criterion] = (sum(la) / len(ids), sum(lb) / len(ids))
        kappa[criterion] = cohen_kappa(la, lb)
        pooled_a += la
        pooled_b += lb
    kappa["pooled"] = cohen_kappa(pooled_a, pooled_b)
    excluded = {}
    for i in ids:
        failed = [f"{c} ({'+'.join(w for w, s in (('A', a), ('B', b)) if s[i][c] == 0)})" for c in CRITERIA if a[i][c] == 0 or b[i][c] == 0]
        if failed:
            excluded[i] = failed
    return HumanCheck(len(ids), rates, kappa, excluded)


def report_text(check: HumanCheck) -> str:
    lines = [f"Human check of {check.n_dialogues} dialogues (two annotators):", "| criterion | pass A | pass B | Cohen's kappa |", "|---|---:|---:|---:|"]
    for c in CRITERIA:
        k = check.kappa[c]
        lines.append(f"| {c} | {check.pass_rates[c][0]:.3f} | {check.pass_rates[c][1]:.3f} | {'n/a' if math.isnan(k) else f'{k:.3f}'} |")
    lines.append(f"| pooled | | | {check.kappa['pooled']:.3f} |")
    lines.append(f"excluded (any failure): {len(check.excluded)}")
    return "\n".join(lines)


def load_exclusions(path: Path | str) -> dict[str, list[str]]:
    """dataset_id -> reasons from an exclusions file written by `human-check import`."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    excluded = data.get("excluded") if isinstance(data, dict) else None
    if not isinstance(excluded, dict):
        raise ValueError(f"{path}: not an exclusions file (needs an 'excluded' object)")
    return {str(k): list(v) for k, v in excluded.items()}


def main(argv: list[str] | None = None) -> int:
    """`speecheq human-check export|import ...`."""
    parser = argparse.ArgumentParser(prog="speecheq human-check", description="Human check: annotation sheet export and import.")
    sub = parser.add_subparsers(dest="command", required=True)
    exp = sub.add_parser("export", help="write a stratified annotation sheet (k per subscale)")
    exp.add_argument("raw_dir", metavar="RAW_DIR")
    exp.add_argument("sheet", metavar="SHEET.csv")
    exp.add_argument("--per-subscale", type=int, default=DEFAULT_PER_SUBSCALE)
    exp.add_argument("--seed", type=int, default=0)
    exp.add_argument("--overwrite", action="store_true", help="replace an existing SHEET.csv (its annotations are lost)")
    imp = sub.add_parser("import", help="two filled sheets -> pass rates, Cohen's kappa, exclusions")
    imp.add_argument("sheet_a", metavar="SHEET_A.csv")
    imp.add_argument("sheet_b", metavar="SHEET_B.csv")
    imp.add_argument("--out", required=True, metavar="EXCLUDE.json", help="exclusions file for `speecheq publish --exclusions`")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    try:
        if args.command == "export":
            n = export_sheet(args.raw_dir, args.sheet, per_subscale=args.per_subscale, seed=args.seed, overwrite=args.overwrite)
            print(f"wrote {n} dialogues to {args.sheet}; criteria (1 = pass, 0 = fail):")
            for c in CRITERIA:
                print(f"  {c}: {CRITERIA_HELP[c]}")
        else:
            if Path(args.out).exists():  # replace only an earlier exclusions file, never something else at that path
                try:
                    load_exclusions(args.out)
                except (OSError, ValueError, UnicodeDecodeError) as exc:
                    raise ValueError(f"--out {args.out} exists and is not an exclusions file; it is left as it is: "
                                     "choose another path") from exc
            check = compare(read_sheet(args.sheet_a), read_sheet(args.sheet_b))
            payload = {"n_dialogues": check.n_dialogues, "pass_rates": check.pass_rates,
                       "kappa": {k: (None if math.isnan(v) else v) for k, v in check.kappa.items()}, "excluded": check.excluded}
            write_bytes_atomic(args.out, json.dumps(payload, indent=1).encode("utf-8"))
            print(report_text(check))
            print(f"written: {args.out}")
    except (OSError, ValueError) as exc:
        print(f"speecheq human-check {args.command}: error: {exc}", file=sys.stderr)
        return exit_status(exc)
    return 0
