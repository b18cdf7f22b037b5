"""Generation pipeline benchmark: contrast-feature speed (yin vs pyin), contrast_v1 calibration on the real pairs, and the 45-dialogue set.

Usage: .venv/bin/python bench/bench_generation.py [--workers 2] [--skip-generate] [--out /tmp/speecheq-bench-gen]

1. Contrast features (decode + all six features) of the 180 test clips of the
   90 real pairs in ../shared/data/speecheq-arena-v1, on `--workers` processes:
   clips/s with our yin-based pitch tracker vs the same features with
   librosa.pyin (goal: >= 10x), and the projected time for the full dataset
   (2,265 dialogues x 4 test clips; goal: < 10 min on 2 cores).
2. contrast_v1 calibration on the real pairs: score distribution, per-feature
   gaps against their thresholds, and the pairs below the pass mark with
   their tone instructions.
3. `speecheq generate --llm scripted --tts espeak --per-cell 1 --seed 0`
   (45 dialogues) timed, and its shortcut audit beside the authors' data.

Measured on the 2-core machine (idle): yin 32.1 clips/s vs pyin 1.59 (20.1x),
4.7 min projected for 2,265 dialogues; the 45-dialogue set in 34 s with every
rule at 0.500 of pairs (authors' data: "slower" 0.800).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REAL = ROOT.parent / "shared" / "data" / "speecheq-arena-v1"
FULL_DIALOGUES = 2265


def _features(job: tuple[str, str]) -> dict:
    from speecheq_dataset.acoustics import clip_features
    from speecheq_dataset.audio import decode_audio

    path, tracker = job
    return clip_features(*decode_audio(path), pitch_tracker=tracker).as_dict()


def _warm(_=None) -> None:
    # numba kernels of librosa compile on first use in each process: not part of the steady-state rate
    first = next(iter(sorted(REAL.glob("*/*/audio/04.mp3"))))
    _features((str(first), "yin"))
    _features((str(first), "pyin"))


def rate(paths: list[Path], tracker: str, workers: int) -> tuple[float, list[dict]]:
    with ProcessPoolExecutor(max_workers=workers) as pool:
        list(pool.map(_warm, range(workers)))
        start = time.perf_counter()
        results = list(pool.map(_features, [(str(p), tracker) for p in paths], chunksize=4))
        elapsed = time.perf_counter() - start
    return len(paths) / elapsed, results


def speed(workers: int) -> dict:
    folders = sorted(p.parent for p in REAL.glob("*/*/metadata.json"))
    paths = [f / "audio" / f"{stem}.mp3" for f in folders for stem in ("04", "05", "07", "08")]
    ours, ours_features = rate(paths, "yin", workers)
    pyin, _ = rate(paths, "pyin", workers)
    projected = FULL_DIALOGUES * 4 / ours
    print(f"contrast features of {len(paths)} real test clips (decode + 6 features) on {workers} processes:")
    print(f"  yin (ours) {ours:.1f} clips/s, pyin {pyin:.2f} clips/s -> {ours / pyin:.1f}x faster (goal >= 10x)")
    print(f"  projected for {FULL_DIALOGUES} dialogues x 4 test clips: {projected / 60:.1f} min (goal < 10 min); "
          f"with the catalyst clips for the audit (x6): {projected * 1.5 / 60:.1f} min")
    return {"clips": len(paths), "yin_clips_per_s": ours, "pyin_clips_per_s": pyin, "ratio": ours / pyin,
            "projected_full_min": projected / 60, "features": dict(zip(map(str, paths), ours_features))}


def calibration(features: dict) -> dict:
    from speecheq_dataset.acoustics import CONTRAST_V1
    from speecheq_dataset.acoustics import ClipFeatures
    from speecheq_dataset.acoustics import contrast_score

    rows = []
    for folder in sorted(p.parent for p in REAL.glob("*/*/metadata.json")):
        meta = json.loads((folder / "metadata.json").read_text())
        tones = {(e["sentence_number"], e.get("eq_level")): e.get("tone_description") for e in meta["audio_files"]}
        for turn, (hi, lo) in ((4, ("04", "05")), (6, ("07", "08"))):
            a = ClipFeatures.from_dict(features[str(folder / "audio" / f"{hi}.mp3")])
            b = ClipFeatures.from_dict(features[str(folder / "audio" / f"{lo}.mp3")])
            rows.append((folder.name, turn, contrast_score(a, b), tones[(turn, "high")], tones[(turn, "low")]))
    scores = np.array([r[2].score for r in rows])
    print(f"\ncontrast_v1 on {len(rows)} real pairs: mean {scores.mean():.2f}, sd {scores.std(ddof=1):.2f}, min {scores.min():.2f}, "
          f"p10 {np.percentile(scores, 10):.2f}, median {np.median(scores):.2f}, p90 {np.percentile(scores, 90):.2f}, "
          f"max {scores.max():.2f}; pass {np.mean(scores >= 4):.1%}")
    print("  histogram " + ", ".join(f"[{k},{k + 1}) {int(np.sum((scores >= k) & (scores < k + 1)))}" for k in range(8))
          + f", 8: {int(np.sum(scores >= 8))}")
    print(f"  {'feature':<9} {'tau':>7} {'median gap':>11} {'saturated':>10} {'mean points':>12}")
    for name, tau in CONTRAST_V1.taus.items():
        gaps = np.array([r[2].gaps[name] for r in rows if r[2].gaps[name] is not None])
        points = np.array([r[2].points[name] for r in rows])
        print(f"  {name:<9} {tau:7.3f} {np.median(gaps):11.3f} {np.mean(gaps >= tau):10.1%} {points.mean():12.2f}")
    print("  pairs below 4:")
    for dialogue, turn, result, high, low in sorted(rows, key=lambda r: r[2].score):
        if result.passed:
            break
        gaps = ", ".join(f"{k} {v:.2f}" for k, v in result.gaps.items() if v is not None)
        print(f"    {dialogue} turn {turn}: {result.score:.2f} ({gaps})\n      high: {high}\n      low:  {low}")
    return {"scores": scores.tolist()}


def generated(out: Path) -> None:
    from builders.audit import audit_table
    from builders.audit import load_pairs
    from builders.features import FeatureCache
    from builders.generation.pipeline import GenerateConfig
    from builders.generation.pipeline import run_pipeline

    start = time.perf_counter()
    summary = run_pipeline(GenerateConfig(out_dir=str(out), per_cell=1, seed=0), progress=False)
    elapsed = time.perf_counter() - start
    print(f"\nspeecheq generate --llm scripted --tts espeak --per-cell 1 --seed 0: {summary.written + summary.unchanged} dialogues "
          f"in {elapsed:.1f} s")
    for stats in summary.stages:
        print("  " + stats.line())
    generated_rows = audit_table(load_pairs(out, FeatureCache()))  # measured again from the written clips
    real_rows = {r.rule: r for r in audit_table(load_pairs(REAL, FeatureCache()))}
    print(f"\n  {'rule':<24} {'generated pairs':>15} {'traj':>6}   {'authors v1 pairs':>16} {'traj':>6}")
    for r in generated_rows:
        ref = real_rows[r.rule]
        print(f"  {r.rule:<24} {r.pair_accuracy:15.3f} {r.traj_accuracy:6.3f}   {ref.pair_accuracy:16.3f} {ref.traj_accuracy:6.3f}")
    print(f"  n pairs: generated {generated_rows[0].n_pairs}, authors {real_rows['slower'].n_pairs}; "
          f"highest generated rule {max(r.pair_accuracy for r in generated_rows):.3f} (bound 0.600)")
    print(f"  oracle text check (scripted): accuracy {summary.oracle['accuracy']:.3f}, flagged {len(summary.oracle['flagged'])}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-generate", action="store_true")
    parser.add_argument("--out", default="/tmp/speecheq-bench-gen")
    args = parser.parse_args()
    os.environ.setdefault("HF_HOME", str(ROOT / ".cache" / "hf"))
    measured = speed(args.workers)
    calibration(measured["features"])
    if not args.skip_generate:
        generated(Path(args.out))


if __name__ == "__main__":
    main()
