"""Delivery shortcuts on the real data: every prosody rule's accuracy and the contrast_v1 pass rate.

Usage: .venv/bin/python bench/bench_prosody.py [RAW_DIR]   (default ../shared/data/speecheq-arena-v1)
Also prints the cost of the features (seconds per clip), to compare with SPEC §4's budget.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from eval_scripts.models.prosody import RULES, measure_rule  # noqa: E402
from speecheq_dataset.acoustics import clip_features, contrast_score  # noqa: E402
from speecheq_dataset.audio import decode_audio  # noqa: E402

CLIPS = ("03", "04", "05", "06", "07", "08")


def main() -> None:
    raw_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "shared" / "data" / "speecheq-arena-v1"
    folders = sorted(p.parent for p in raw_dir.glob("*/*/metadata.json"))
    decoded = {(folder, n): decode_audio(folder / "audio" / f"{n}.mp3") for folder in folders for n in CLIPS}
    clip_features(*next(iter(decoded.values())))  # warm-up: librosa's numba kernels compile on first use
    start = time.perf_counter()
    features = {key: clip_features(*clip) for key, clip in decoded.items()}
    per_clip = (time.perf_counter() - start) / len(decoded)
    # The pitch tracker choice (SPEC §4): probabilistic yin on the same clips, for the ratio.
    import librosa

    sample = list(decoded.values())[:12]
    librosa.pyin(sample[0][0][:16000], fmin=65, fmax=600, sr=sample[0][1])
    start = time.perf_counter()
    for samples, sr in sample:
        librosa.pyin(librosa.resample(samples, orig_sr=sr, target_sr=16000), fmin=65, fmax=600, sr=16000, frame_length=1024, hop_length=256)
    pyin_per_clip = (time.perf_counter() - start) / len(sample)
    dialogues = [
        {
            "turn4": (features[(f, "04")], features[(f, "05")], features[(f, "03")]),
            "turn6": (features[(f, "07")], features[(f, "08")], features[(f, "06")]),
        }
        for f in folders
    ]
    print(f"{len(dialogues)} dialogues, {len(decoded)} clips; all features {per_clip * 1000:.1f} ms per clip; "
          f"pyin pitch alone {pyin_per_clip * 1000:.0f} ms per clip ({pyin_per_clip / per_clip:.0f}x our whole feature set)")
    print(f"{'rule':<24} {'Acc1':>6} {'Acc2':>6} {'Acc_all':>8} {'Acc_traj':>9} {'ties':>5}")
    for rule in RULES:
        r = measure_rule(rule, dialogues)
        print(f"{rule:<24} {r['acc_turn4']:6.3f} {r['acc_turn6']:6.3f} {r['acc_all']:8.3f} {r['acc_traj']:9.3f} {r['ties']:5d}")
    scores = np.array([contrast_score(d[t][0], d[t][1]).score for d in dialogues for t in ("turn4", "turn6")])
    print(f"contrast_v1 on {len(scores)} real pairs: mean {scores.mean():.2f}/8, median {np.median(scores):.2f}, pass (>=4) {np.mean(scores >= 4):.1%}")
    high_longer = np.mean([d[t][0].duration_s > d[t][1].duration_s for d in dialogues for t in ("turn4", "turn6")])
    high_quieter = np.mean([d[t][0].rms_db < d[t][1].rms_db for d in dialogues for t in ("turn4", "turn6")])
    print(f"high-EQ clip longer in {high_longer:.1%} of pairs, quieter in {high_quieter:.1%}")


if __name__ == "__main__":
    main()
