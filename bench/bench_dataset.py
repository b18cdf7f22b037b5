"""Benchmark: building and exporting the SpeechEQ dataset, and streaming it back (issue 2).

Phases (each in its own child process, so peak RSS is the phase's own):
1. `real`: build + export of the 45 real dialogues (fresh build cache): wall time, peak RSS.
2. `synth-raw`: a synthetic full-size raw set of 2,265 dialogues (151 per subscale) made by
   reusing the real clips (symlinks) under a temporary folder outside the repo.
3. `synth-build`, `synth-export`: build (validation decodes all 18,120 clips), then export:
   wall times, size on disk, peak RSS (and peak anonymous RSS: memory-mapped Arrow pages
   count in plain RSS but are page cache the kernel can drop).
4. `synth-stream`: `load_dataset(export, streaming=True)` over all rows, decoding all
   eight clips of each: dialogues/s, audio seconds decoded per wall second, peak RSS.
   Goal: peak RSS under 1.5 GB.

Run: .venv/bin/python bench/bench_dataset.py [--work-dir /tmp/speecheq-bench] [--dialogues 2265] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REAL_RAW = ROOT.parent / "shared" / "data" / "speecheq-arena-v1"
RSS_GOAL_BYTES = 1.5 * 2**30


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


class AnonPeak:
    """Samples RssAnon (heap, not file-backed pages) every 20 ms; memory-mapped Arrow files inflate plain RSS."""

    def __init__(self):
        import threading

        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.current())
            self._stop.wait(0.02)

    @staticmethod
    def current() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return max(self.peak, self.current())


def _mib(n: float) -> str:
    return f"{n / 2**20:.0f} MiB"


def phase_real(work: Path) -> dict:
    from builders.export import build_export

    start = time.perf_counter()
    result = build_export(REAL_RAW, work / "real-export", cache_dir=work)
    return {
        "dialogues": result.stats.dialogues,
        "wall_s": time.perf_counter() - start,
        "peak_rss_bytes": _peak_rss_bytes(),
        "export_bytes": result.size_bytes,
    }


def phase_synth_raw(work: Path, count: int) -> dict:
    from speecheq_dataset.raw import METADATA_FILE
    from speecheq_dataset.taxonomy import SUBSCALE_SLUGS

    start = time.perf_counter()
    raw = work / "synth-raw"
    shutil.rmtree(raw, ignore_errors=True)
    by_subscale = {s: sorted(p.parent for p in REAL_RAW.glob(f"{s}/*/{METADATA_FILE}")) for s in SUBSCALE_SLUGS}
    for index in range(count):
        slug = SUBSCALE_SLUGS[index % len(SUBSCALE_SLUGS)]
        sources = by_subscale[slug]
        source = sources[(index // len(SUBSCALE_SLUGS)) % len(sources)]
        dialogue_id = f"synth_{index:05d}_{source.name}"
        folder = raw / slug / dialogue_id
        (folder / "audio").mkdir(parents=True)
        metadata = json.loads((source / METADATA_FILE).read_text())
        metadata["generation_metadata"]["dataset_id"] = dialogue_id
        (folder / METADATA_FILE).write_text(json.dumps(metadata))
        for clip in sorted((source / "audio").iterdir()):
            os.symlink(clip, folder / "audio" / clip.name)
    return {"dialogues": count, "wall_s": time.perf_counter() - start}


def phase_synth_build(work: Path) -> dict:
    from speecheq_dataset.builder import build_raw

    anon = AnonPeak()
    start = time.perf_counter()
    dataset, rejected = build_raw(work / "synth-raw", cache_dir=work / "synth-build")
    return {
        "dialogues": len(dataset),
        "rejected": len(rejected),
        "build_s": time.perf_counter() - start,
        "peak_rss_bytes": _peak_rss_bytes(),
        "peak_anon_bytes": anon.stop(),
    }


def phase_synth_export(work: Path) -> dict:
    from builders.export import export_hub_folder
    from speecheq_dataset.builder import build_raw

    dataset, rejected = build_raw(work / "synth-raw", cache_dir=work / "synth-build")  # cache hit
    anon = AnonPeak()
    start = time.perf_counter()
    result = export_hub_folder(dataset, work / "synth-export", rejected=rejected)
    return {
        "dialogues": result.stats.dialogues,
        "export_s": time.perf_counter() - start,
        "export_bytes": result.size_bytes,
        "shards": len(result.files) - 1,
        "hours": result.stats.hours,
        "peak_rss_bytes": _peak_rss_bytes(),
        "peak_anon_bytes": anon.stop(),
    }


def phase_synth_stream(work: Path) -> dict:
    import datasets

    from speecheq_dataset.columns import CLIP_COLUMNS

    anon = AnonPeak()
    start = time.perf_counter()
    stream = datasets.load_dataset(str(work / "synth-export"), split="test", streaming=True)
    rows, audio_seconds = 0, 0.0
    for row in stream:
        for column in CLIP_COLUMNS:
            clip = row[column]
            audio_seconds += len(clip["array"]) / clip["sampling_rate"]
        rows += 1
    wall = time.perf_counter() - start
    return {
        "dialogues": rows,
        "wall_s": wall,
        "dialogues_per_s": rows / wall,
        "audio_s_per_wall_s": audio_seconds / wall,
        "peak_rss_bytes": _peak_rss_bytes(),
        "peak_anon_bytes": anon.stop(),
    }


def _run_child(phase: str, args: argparse.Namespace) -> dict:
    command = [sys.executable, __file__, "--phase", phase, "--work-dir", str(args.work_dir), "--dialogues", str(args.dialogues)]
    env = {**os.environ, "HF_HOME": str(args.work_dir / "hf-home"), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"phase {phase} failed:\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work-dir", type=Path, default=Path("/tmp/speecheq-bench"))
    parser.add_argument("--dialogues", type=int, default=2265)
    parser.add_argument("--keep", action="store_true", help="keep the work folder (default: removed at the end)")
    parser.add_argument("--phase", choices=["real", "synth-raw", "synth-build", "synth-export", "synth-stream"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:  # child process: run one phase, print its JSON
        args.work_dir.mkdir(parents=True, exist_ok=True)
        phases = {
            "real": lambda: phase_real(args.work_dir),
            "synth-raw": lambda: phase_synth_raw(args.work_dir, args.dialogues),
            "synth-build": lambda: phase_synth_build(args.work_dir),
            "synth-export": lambda: phase_synth_export(args.work_dir),
            "synth-stream": lambda: phase_synth_stream(args.work_dir),
        }
        print(json.dumps(phases[args.phase]()))
        return 0

    if ROOT in args.work_dir.resolve().parents:
        raise SystemExit(f"--work-dir {args.work_dir} is inside the repository; use a folder outside it")
    shutil.rmtree(args.work_dir, ignore_errors=True)
    args.work_dir.mkdir(parents=True)
    try:
        real = _run_child("real", args)
        print(f"real {real['dialogues']}: build+export {real['wall_s']:.1f} s, peak RSS {real['peak_rss_bytes'] / 2**20:.0f} MiB, "
              f"export {real['export_bytes'] / 1e6:.1f} MB")
        raw = _run_child("synth-raw", args)
        print(f"synthetic raw set: {raw['dialogues']} dialogues in {raw['wall_s']:.1f} s (clips symlinked)")
        build = _run_child("synth-build", args)
        print(f"synthetic {build['dialogues']}: build (validate + decode all {8 * build['dialogues']} clips) "
              f"{build['build_s']:.1f} s, peak RSS {_mib(build['peak_rss_bytes'])} (anonymous {_mib(build['peak_anon_bytes'])})")
        exp = _run_child("synth-export", args)
        print(f"synthetic {exp['dialogues']}: export {exp['export_s']:.1f} s, {exp['shards']} shards, "
              f"{exp['export_bytes'] / 1e9:.2f} GB on disk, {exp['hours']:.1f} h audio, "
              f"peak RSS {_mib(exp['peak_rss_bytes'])} (anonymous {_mib(exp['peak_anon_bytes'])})")
        stream = _run_child("synth-stream", args)
        ok = stream["peak_rss_bytes"] < RSS_GOAL_BYTES
        print(f"streaming {stream['dialogues']} dialogues with all clips decoded: {stream['wall_s']:.1f} s, "
              f"{stream['dialogues_per_s']:.1f} dialogues/s, {stream['audio_s_per_wall_s']:.0f}x real time, "
              f"peak RSS {_mib(stream['peak_rss_bytes'])} (anonymous {_mib(stream['peak_anon_bytes'])}; "
              f"goal < 1536 MiB: {'met' if ok else 'NOT met'})")
        per_dialogue_real = real["wall_s"] / real["dialogues"]
        per_dialogue_synth = (build["build_s"] + exp["export_s"]) / exp["dialogues"]
        print(f"ratio: build+export time per dialogue, full size / {real['dialogues']} real = {per_dialogue_synth / per_dialogue_real:.2f}")
        return 0 if ok else 1
    finally:
        if not args.keep:
            shutil.rmtree(args.work_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
