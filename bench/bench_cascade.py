"""Per-clip caching in the cascade: what a second variant costs after the first, on the 45 real dialogues (CPU, tiny models).

For each setting (choice mode : Whisper size) this runs, in one process and with a
fresh clip cache:
  1. `cascade` variant emo_num — every clip is transcribed and rated (tiny audeering-architecture regressor);
  2. `cascade` variant emo_des — the same clips: transcripts and V/A/D come from the cache;
and prints each run's wall time (model building + the runner's whole `run()`: dataset,
MP3 decoding, ASR/SER, the text LLM, writing), the runner's own session time, the
front end's time (hashing + ASR + SER + cache reads, `front_end_s` of the adapter),
the clips computed, and the ratios second / first. Goal: the second variant costs
< 10 % of the first.

Every component has random weights (offline). Whisper sizes: `toy` is our tiny-random
(d_model 64, 2 + 2 layers); `whisper-tiny` has the architecture of openai/whisper-tiny
(39 M parameters), the smallest released size. The text LLM is the toy Qwen2 in every
setting; a real 30B LLM, which caching cannot save, would be a larger share of both runs
(docs/cascade.md has the measured numbers and that caveat).

    .venv/bin/python bench/bench_cascade.py [--dialogues 45] [--threads 1] [--settings logprob:toy,...] [--prefetch 0]

Takes about 10 minutes on the 2-core machine (the whisper-tiny-size cold run is ~7 of them).
Measured (docs/cascade.md): second / first = 15.9 % (logprob, toy Whisper), 17.6 % (generate, toy),
1.7 % (logprob, whisper-tiny size); the front end of the second run is 0.06-0.6 % of the first's.

torch runs on --threads threads (default 1: on the shared 2-core machine a busy second core
made two threads 10-100x slower on tiny ops; see docs/cascade.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REAL_RAW_DIR = ROOT.parent / "shared" / "data" / "speecheq-arena-v1"


# The architecture of openai/whisper-tiny (39 M parameters), the smallest released Whisper, with random weights.
WHISPER_TINY_DIMS = dict(d_model=384, encoder_layers=4, decoder_layers=4, encoder_attention_heads=6, decoder_attention_heads=6,
                         encoder_ffn_dim=1536, decoder_ffn_dim=1536)


def cascade_model(variant: str, cache_dir: Path, asr_size: str):
    """The cascade adapter; with asr_size "whisper-tiny" its Whisper has the released tiny size (random weights)."""
    from eval_scripts.components.tiny import build_tiny_whisper
    from eval_scripts.models.base import build_model

    model = build_model("cascade", asr="tiny-random", ser="tiny-random", llm="tiny-random", variant=variant, cache_dir=str(cache_dir))
    if asr_size == "whisper-tiny":
        model.asr.model = build_tiny_whisper(**WHISPER_TINY_DIMS).model
    return model


def one_run(variant: str, mode: str, cache_dir: Path, out: Path, dialogues: int, prefetch: int, asr_size: str) -> dict:
    from eval_scripts import runner

    config = runner.RunConfig(
        model="cascade", output_dir=str(out), dataset=str(REAL_RAW_DIR), limit=dialogues, batch_size=8, choice_mode=mode, n_bootstrap=0,
        prefetch=prefetch,
        model_args={"asr": "tiny-random", "ser": "tiny-random", "llm": "tiny-random", "variant": variant, "cache_dir": str(cache_dir)},
    )
    began = time.perf_counter()  # model building included
    results = runner.run(config, model=cascade_model(variant, cache_dir, asr_size), progress=False)
    wall = time.perf_counter() - began
    model = results["model"]
    return {"variant": variant, "wall_s": wall, "session_s": results["deployment"]["session"]["wall_s"], "front_end_s": model["front_end_s"],
            "asr_misses": model["cache"]["asr"]["misses"], "ser_misses": model["cache"]["ser"]["misses"],
            "hits": model["cache"]["asr"]["hits"], "queries": results["deployment"]["queries"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialogues", type=int, default=45)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--settings", default="logprob:toy,generate:toy,logprob:whisper-tiny",
                        help="choice mode:ASR size pairs (toy = our tiny Whisper; whisper-tiny = the released tiny size, random weights)")
    parser.add_argument("--prefetch", type=int, default=0, help="the runner's --prefetch (0: decode in the runner's thread)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HOME", str(ROOT / ".cache" / "hf"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import logging

    import torch

    torch.set_num_threads(args.threads)
    logging.basicConfig(level=logging.WARNING)
    report = {}
    with tempfile.TemporaryDirectory(prefix="bench-cascade-") as tmp:
        tmp = Path(tmp)
        for setting in args.settings.split(","):
            mode, asr_size = setting.split(":")
            key = f"{mode}, ASR {asr_size}"
            cache = tmp / f"cache-{mode}-{asr_size}"  # a fresh clip cache for each setting
            first = one_run("emo_num", mode, cache, tmp / f"{mode}-{asr_size}-num", args.dialogues, args.prefetch, asr_size)
            second = one_run("emo_des", mode, cache, tmp / f"{mode}-{asr_size}-des", args.dialogues, args.prefetch, asr_size)
            report[key] = {"first": first, "second": second, "ratio_wall": second["wall_s"] / first["wall_s"],
                           "ratio_session": second["session_s"] / first["session_s"],
                           "ratio_front_end": second["front_end_s"] / first["front_end_s"]}
    print(f"cascade (Whisper + V/A/D regressor + Qwen2 LLM, random weights), {args.dialogues} real dialogues, batch 8, "
          f"torch threads {args.threads}, prefetch {args.prefetch}")
    print(f"{'setting':<24} {'run':<16} {'wall s':>7} {'session s':>10} {'front end s':>12} {'ASR/SER computed':>17} {'queries':>8}")
    for key, r in report.items():
        for which, label in (("first", "emo_num (cold)"), ("second", "emo_des (cached)")):
            run = r[which]
            print(f"{key:<24} {label:<16} {run['wall_s']:>7.1f} {run['session_s']:>10.1f} {run['front_end_s']:>12.2f} "
                  f"{run['asr_misses']:>8}/{run['ser_misses']:<8} {run['queries']:>8}")
        print(f"{key:<24} second/first: wall {r['ratio_wall']:.1%}, session {r['ratio_session']:.1%}, front end {r['ratio_front_end']:.2%}"
              f" (goal < 10 % of the whole run: {'met' if r['ratio_wall'] < 0.10 else 'NOT met'})")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
