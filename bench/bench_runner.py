"""Runner throughput with the tiny random-weight Qwen2.5-Omni thinker on CPU, on real dialogues.

Prints, from one run of this script:
  1. dialogues/s at batch 1 vs batch 8 (generate mode) and whether every answer is identical (goal >= 3x);
  2. logprob vs generate at the same batch size (goal >= 10x);
  3. 1 vs 2 CPU processes through `accelerate launch` (same answers; speed-up bounded by the cores);
  4. generate at batch 8 with the clips loaded ahead in a background thread (--prefetch 1, the
     default on a GPU) vs in the runner's own thread (--prefetch 0, the default on CPU);
and, for each single-process run, where the time goes in ms per query (waiting for the
loader, processor inputs, audio encoder, text prefill, decode steps + generate's loop, the
runner; and the loader's own work: clip decoding and log-mels, ahead of the model).

The tiny model never emits an end token, so every generate query runs the full
--max-new-tokens budget; 128 is about the length of a real model's JSON answer
in the Qwen tokenizer (the authors' recorded answers are 100-250 tokens).

    .venv/bin/python bench/bench_runner.py [--dialogues 8] [--max-new-tokens 128] [--skip-processes]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from bench_timing import time_calls  # noqa: E402
from bench_timing import time_waits  # noqa: E402
REAL_RAW_DIR = ROOT.parent / "shared" / "data" / "speecheq-arena-v1"


def answers(run_dir: Path) -> list[tuple]:
    from eval_scripts import store

    return [(r.uid, r.raw, r.choice, r.output_tokens) for _, r in store.iter_rounds(store.read_samples(run_dir))]


class PhaseTimer:
    """Seconds per phase of a run, from light wrappers/hooks (a few calls per model call; same in every run)."""

    PHASES = ("wait", "inputs", "audio_encoder", "text_prefill", "decode", "other")

    def __init__(self, model) -> None:
        from eval_scripts import prefetch
        from eval_scripts import runner

        self.totals = dict.fromkeys(self.PHASES + ("answer", "loader"), 0.0)
        # The loader (MP3 decoding + resampling; log-mels too when ahead) runs in a background thread
        # with --prefetch 1; "wait" is the time the runner's own thread spends blocked on it.
        self._wrap(runner, "load_dialogues", "loader")
        loader = prefetch.prefetched
        prefetch.prefetched = lambda *args, **kwargs: time_waits(loader(*args, **kwargs), lambda index, waited: self._add("wait", waited))
        self._wrap(model, "encode", "inputs")  # chat template, tokenization, log-mel features
        self._wrap(model, "generate", "answer")
        self._wrap(model, "score", "answer")
        inner = model.model.model  # the thinker's audio encoder + text decoder
        self._hook(inner.audio_tower, lambda args, kwargs: "audio_encoder")
        # The decoder: many positions at once is the prompt (prefill), one position a decode step.
        self._hook(inner.language_model, lambda args, kwargs: "text_prefill" if kwargs["inputs_embeds"].shape[1] > 1 else "decode")

    def _wrap(self, owner, name: str, phase: str) -> None:
        time_calls(owner, name, lambda seconds: self._add(phase, seconds))

    def _add(self, phase: str, seconds: float) -> None:
        self.totals[phase] += seconds

    def _hook(self, module, phase_of) -> None:
        started: list[tuple[str, float]] = []
        module.register_forward_pre_hook(lambda m, args, kwargs: started.append((phase_of(args, kwargs), time.perf_counter())), with_kwargs=True)

        def done(m, args, output):
            phase, began = started.pop()
            self.totals[phase] += time.perf_counter() - began

        module.register_forward_hook(done)

    def start(self) -> None:
        self.totals = dict.fromkeys(self.totals, 0.0)

    def breakdown(self, wall: float, queries: int) -> str:
        """ms per query of each phase; decode includes generate's own loop, other is the runner's own work."""
        t = dict(self.totals)
        model_rest = t["answer"] - t["inputs"] - t["audio_encoder"] - t["text_prefill"] - t["decode"]
        t["decode"] += max(model_rest, 0.0)
        t["other"] = wall - t["answer"] - t["wait"]
        phases = ", ".join(f"{name} {1000 * t[name] / queries:.1f}" for name in self.PHASES)
        return f"{phases} ms/query; loader work {1000 * t['loader'] / queries:.1f}"


def timed_run(model, rows, out_dir: Path, **kw) -> float:
    """Seconds for a whole run (prompts, model calls, parsing, run directory), model and data preloaded."""
    from eval_scripts import runner

    config = runner.RunConfig(model=model.name, output_dir=str(out_dir), n_bootstrap=0, overwrite=True, **kw)
    began = time.perf_counter()
    runner.run(config, model=model, dataset=rows, progress=False)
    return time.perf_counter() - began


def process_run(num_processes: int, n: int, max_new_tokens: int, batch: int, out_dir: Path) -> tuple[float, float]:
    """(whole command, evaluation phase) seconds of `accelerate launch` with N CPU processes."""
    accelerate = Path(sys.executable).with_name("accelerate")
    cmd = [str(accelerate), "launch"]
    cmd += ["--multi_gpu"] if num_processes > 1 else []
    cmd += ["--num_processes", str(num_processes), "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]
    cmd += ["--main_process_port", str(29600 + num_processes)]
    cmd += [str(ROOT / "eval_scripts" / "run.py"), "--model", "qwen2.5-omni", "--model-args", f"pretrained=tiny-random,max_new_tokens={max_new_tokens}"]
    cmd += ["--dataset", str(REAL_RAW_DIR), "--output-dir", str(out_dir), "--limit", str(n), "--batch-size", str(batch)]
    cmd += ["--n-bootstrap", "0", "--no-progress", "--overwrite"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=str(max(1, (os.cpu_count() or 2) // num_processes)))
    began = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"accelerate launch with {num_processes} processes failed:\n{proc.stderr[-3000:]}")
    session = json.loads((out_dir / "results.json").read_text())["deployment"]["session"]
    return elapsed, session["wall_s"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dialogues", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=128)
    p.add_argument("--skip-processes", action="store_true", help="skip the 1-vs-2-process comparison")
    args = p.parse_args(argv)
    os.environ.setdefault("HF_HOME", str(ROOT / ".cache" / "hf"))  # a bench script, not the library
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import logging

    logging.basicConfig(level=logging.WARNING)
    import torch

    from eval_scripts import runner
    from eval_scripts.models.base import build_model

    n = args.dialogues
    rows = runner.first_rows(runner.load_dataset_rows(runner.RunConfig(model="x", output_dir="unused", dataset=str(REAL_RAW_DIR))), n)
    model = build_model("qwen2.5-omni", pretrained="tiny-random", max_new_tokens=args.max_new_tokens)
    print(f"tiny Qwen2.5-Omni thinker ({model.describe()['parameters']:,} random weights), CPU, torch threads {torch.get_num_threads()}, "
          f"{n} real dialogues = {2 * n} queries, max_new_tokens {args.max_new_tokens}")
    timer = PhaseTimer(model)
    phases: dict[str, str] = {}

    def measured(name: str, **kw) -> float:
        timer.start()
        wall = timed_run(model, rows, tmp / name, **kw)
        phases[name] = timer.breakdown(wall, 2 * n)
        return wall

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        timed_run(model, rows.select(range(1)), tmp / "warm", batch_size=1)  # first-call costs out of the way

        t1 = measured("b1", batch_size=1)
        t8 = measured("b8", batch_size=8)
        same = answers(tmp / "b1") == answers(tmp / "b8")
        print(f"\n[1] generate, batch 1: {n / t1:.3f} dialogues/s ({t1:.1f} s)")
        print(f"    generate, batch 8: {n / t8:.3f} dialogues/s ({t8:.1f} s)")
        print(f"    speed-up batch 8 / batch 1: {t1 / t8:.2f}x (goal >= 3x); identical answers (raw text, choice, tokens): {same}")

        tl = measured("lp8", batch_size=8, choice_mode="logprob")
        print(f"\n[2] logprob, batch 8: {n / tl:.3f} dialogues/s ({tl:.1f} s)")
        print(f"    speed-up logprob / generate (batch 8): {t8 / tl:.1f}x (goal >= 10x)")
        tl1 = measured("lp1", batch_size=1, choice_mode="logprob")
        print(f"    logprob batch 1: {n / tl1:.3f} dialogues/s; logprob / generate at batch 1: {t1 / tl1:.1f}x")
        same_lp = [a[2] for a in answers(tmp / "lp1")] == [a[2] for a in answers(tmp / "lp8")]
        print(f"    logprob choices identical at batch 1 and 8: {same_lp}")

        t8_ahead = measured("b8_ahead", batch_size=8, prefetch=1)
        print(f"\n[4] generate, batch 8, clips loaded ahead in a background thread (--prefetch 1): {n / t8_ahead:.3f} dialogues/s, "
              f"{t8 / t8_ahead:.2f}x the runner's own thread (--prefetch 0, the CPU default)")

        print("\n    where the time goes (ms/query: waiting for the loader, processor inputs, audio encoder, text prefill, "
              "decode steps + generate loop, runner; then the loader's own work in its thread):")
        for name, label in (("b1", "generate b1"), ("b8", "generate b8"), ("b8_ahead", "gen b8 ahead"), ("lp1", "logprob b1"), ("lp8", "logprob b8")):
            print(f"    {label:12s} {phases[name]}")

        if not args.skip_processes:
            (c1, e1), (c2, e2) = (process_run(k, n, args.max_new_tokens, 8, tmp / f"p{k}") for k in (1, 2))
            same_p = answers(tmp / "p1") == answers(tmp / "p2")
            print(f"\n[3] accelerate launch, batch 8, {os.cpu_count()} cores (threads split between processes):")
            print(f"    evaluation phase: 1 process {n / e1:.3f} dialogues/s ({e1:.1f} s), 2 processes {n / e2:.3f} dialogues/s ({e2:.1f} s): {e1 / e2:.2f}x")
            print(f"    whole command incl. start-up: {c1:.1f} s vs {c2:.1f} s: {c1 / c2:.2f}x; identical answers: {same_p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
