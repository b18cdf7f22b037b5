"""bench/bench_gpu.py: pre-decoded clips, the figures' arithmetic, and the whole bench on CPU with the tiny model."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from eval_scripts import runner

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "bench" / "bench_gpu.py")
bench_gpu = importlib.util.module_from_spec(spec)
sys.modules.setdefault("bench_gpu", bench_gpu)
spec.loader.exec_module(bench_gpu)

# Run inside the bench's process: imports of these packages *by our code* fail, as on a GPU box that lacks them.
# (transformers probes for them itself and finds them here; on the box it finds nothing and moves on.)
_WITHOUT_DATA_STACK = r"""
import importlib.abc, runpy, sys
ABSENT = {"datasets", "torchcodec", "librosa", "soundfile", "evaluate", "scipy", "numba", "httpx"}
OURS = ("eval_scripts", "speecheq_dataset", "speecheq_metric", "bench_gpu", "__main__", "__mp_main__")
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in ABSENT:
            return None
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename.startswith("<frozen"):
            frame = frame.f_back
        importer = frame.f_globals.get("__name__", "") if frame is not None else ""
        if importer.split(".")[0] in OURS:
            raise ModuleNotFoundError(f"No module named {name!r} (imported by {importer})", name=name)
        return None
sys.meta_path.insert(0, Absent())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.fixture(scope="module")
def clips(real_raw_dir, tmp_path_factory):
    return bench_gpu.prepare_clips(str(real_raw_dir), tmp_path_factory.mktemp("clips"), dialogues=3)


def test_prepared_clips_are_the_runners_own_clips_at_16_bit(clips, real_rows):
    rows = bench_gpu.PreparedDialogues(clips)
    assert len(rows) == 3 and rows["id"] == [str(i) for i in real_rows["id"][:3]]
    for k in range(3):
        ours, theirs = runner.dialogue_from_row(rows[k], 16000), runner.dialogue_from_row(real_rows[k], 16000)
        assert ours.id == theirs.id and ours.subscale == theirs.subscale and ours.fields == theirs.fields
        for column, clip in theirs.clips.items():
            mine = ours.clips[column]
            assert mine.array.shape == clip.array.shape and (mine.text, mine.tone) == (clip.text, clip.tone)
            assert np.max(np.abs(mine.array - np.clip(clip.array, -1, 1))) <= 0.5 / 32767 + 1e-7  # one rounding to 16 bits
    assert rows[0]["turn1_audio"]["array"] is not rows[0]["turn1_audio"]["array"]  # a fresh array per access: no memo carries over
    first_two = rows.select(range(2))
    assert first_two["id"] == rows["id"][:2]
    assert first_two.content_fingerprint() != rows.content_fingerprint() == bench_gpu.PreparedDialogues(clips).content_fingerprint()
    from speecheq_dataset.loading import dataset_fingerprint

    assert dataset_fingerprint(rows) == rows.content_fingerprint()  # what the runner records and resumes by


def test_a_folder_without_a_manifest_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no manifest.json.*bench_gpu.py prepare"):
        bench_gpu.PreparedDialogues(tmp_path)


def test_the_7b_shape_is_the_released_thinker_and_its_limits_are_the_issues():
    """Built on the meta device (no memory): the Qwen2.5-Omni-7B text decoder; its roofline figures by hand."""
    loaded = bench_gpu.build_loaded("qwen2.5-omni", "7b", "meta", "bfloat16")
    sizes = bench_gpu.decoder_sizes(loaded.model)
    assert (sizes["hidden"], sizes["layers"], sizes["attention_width"], sizes["kv_width"], sizes["bytes_per_param"]) == (3584, 28, 3584, 512, 2)
    assert sizes["head_params"] == 3584 * 152064
    # One batch-1 decode step reads the 28 layers and the head: ~14.1 GB, plus ~1,664 positions x 57 KB of KV cache.
    step = bench_gpu.decode_step_bytes(sizes, rows=1, context=1664)
    assert 14.1e9 < step < 14.3e9 and 2.9 < 1000 * step / 4.8e12 < 3.1  # ms at the H200's 4.8 TB/s (issue: ~3.5 ms)
    flops = bench_gpu.prefill_flops(sizes, [1600])
    assert flops == pytest.approx(2 * sizes["layer_params"] * 1600 + 2 * 28 * 1600**2 * 3584 + 2 * 3584 * 152064)
    assert 21e12 < flops < 22e12  # issue: ~24 TFLOP with the head on every position


@pytest.mark.parametrize(
    "name, given, expected",
    [
        ("NVIDIA H200", (None, None), (989.0, 4.8)),
        ("NVIDIA H100 80GB HBM3", (None, None), (989.0, 3.35)),
        ("NVIDIA H100 PCIe", (None, None), (756.0, 2.0)),
        ("NVIDIA H200", (790.0, None), (790.0, 4.8)),
        ("Some Future GPU", (None, None), (None, None)),
    ],
)
def test_peak_figures_come_from_the_device_name_unless_given(name, given, expected):
    assert bench_gpu.device_peaks(name, *given)[:2] == expected


@pytest.mark.slow
def test_the_bench_runs_end_to_end_on_cpu_without_the_data_stack(clips, tmp_path):
    out = tmp_path / "bench"
    command = [sys.executable, "-c", _WITHOUT_DATA_STACK, str(ROOT / "bench" / "bench_gpu.py"), "run", "--clips", str(clips), "--shape", "tiny",
               "--dialogues", "3", "--batch-sizes", "1,2", "--max-new-tokens", "4", "--batch1-limit", "2", "--output", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "bench_gpu.json").read_text())
    log = (out / "bench_gpu.log").read_text()
    assert "| generate, batch 1 |" in log and "logprob" in log
    runs = {(r["mode"], r["batch_size"]): r for r in report["runs"]}
    assert set(runs) == {("generate", 1), ("generate", 2), ("logprob", 1), ("logprob", 2)}
    assert runs[("generate", 1)]["dialogues"] == 2 and runs[("generate", 2)]["dialogues"] == 3  # the batch-1 budget
    for (mode, _), entry in runs.items():
        for key in ("dialogues_per_s", "queries_per_s", "output_tokens_per_s", "loader_wait_share", "loader_wait_share_after_first_chunk", "prefill_tflops", "warm_up_s"):
            assert entry[key] >= 0, key
        assert set(entry["ms_per_query"]) == {"loader_wait", "inputs", "audio_encoder", "text_prefill", "decode", "adapter_rest", "runner"}
        assert entry["ms_per_query"]["audio_encoder"] > 0 and entry["ms_per_query"]["text_prefill"] > 0
        assert (entry["ms_per_query"]["decode"] > 0 and entry["decode_ms_per_step"] > 0) if mode == "generate" else "decode_ms_per_step" not in entry
    assert runs[("generate", 2)]["decode_rows_per_step"] == 1.5  # each round: a batch of 2, then 1
    # greedy float32: identical at batch 1 and 2, on the rounds both runs answered
    assert report["agreement"]["generate"]["1_vs_2"] == {"rounds": 4, "same_choice": 1.0, "same_text": 1.0}
    assert report["agreement"]["logprob"]["1_vs_2"] == {"rounds": 6, "same_choice": 1.0}
    assert report["versions"]["transformers"] and report["device"]["name"] and report["model"]["speedups"]
