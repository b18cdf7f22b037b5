"""Runner throughput at full size on one GPU (issue #13), from one command, on a box with only torch, transformers and accelerate.

It builds the random-weight Qwen2.5-Omni thinker from transformers' config defaults (the
7B shape) on the device, wraps it in this project's adapter, and runs this project's
runner on N real dialogues in generate and logprob mode at several batch sizes. It writes
OUT/bench_gpu.json and OUT/bench_gpu.log: dialogues/s, queries/s, output tokens/s, ms per
query of each phase (device-synchronised), decode ms per step against the memory-bandwidth
limit, prefill TFLOP/s against the peak, the share of time spent waiting for the loader,
peak memory, agreement of the choices across batch sizes, versions and the GPU's name.

The box needs no FFmpeg, `datasets`, torchcodec, librosa or network: the dialogues come
as pre-decoded clips, prepared once where the data is (docs/runner.md › "GPU bench"):

    python bench/bench_gpu.py prepare --source ../shared/data/speecheq-arena-v1 --dialogues 32 --out .bench-clips
    python bench/bench_gpu.py run --clips .bench-clips --shape 7b --output runs/bench-gpu            # on the GPU
    python bench/bench_gpu.py run --clips .bench-clips --shape tiny --dialogues 4 --batch-sizes 1,4  # on a CPU, seconds

Random weights never stop early, so every generate query runs all --max-new-tokens.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import platform
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for _path in (ROOT, ROOT / "bench"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
from bench_timing import time_calls  # noqa: E402
from bench_timing import time_waits  # noqa: E402

logger = logging.getLogger("bench_gpu")

CLIPS_FORMAT = 1
SAMPLING_RATE = 16000
# Dense bf16 tensor-core TFLOP/s and memory TB/s from the vendor's spec sheets, by a fragment of
# torch.cuda.get_device_name(); --peak-tflops / --peak-bandwidth override (e.g. for a clocked-down part).
GPU_PEAKS = {
    "H200": (989.0, 4.8),
    "H100 PCIe": (756.0, 2.0),
    "H100 NVL": (835.0, 3.9),
    "H100": (989.0, 3.35),
    "A100": (312.0, 2.0),
    "L40S": (362.0, 0.864),
    "L4": (121.0, 0.3),
}


# ---------------------------------------------------------------- pre-decoded clips


def prepare_clips(source: str, out: Path, dialogues: int) -> Path:
    """Decode the first N dialogues of a dataset (any --dataset source) to 16-kHz int16 clips in `out`.

    Runs where the project's full environment is (it decodes with the runner's own loader).
    16-bit keeps 32 dialogues at ~37 MB (float32 would be ~100 MB), small enough to copy
    beside the wheels (docs/runner.md › "GPU bench").
    """
    import numpy as np

    from eval_scripts import runner
    from speecheq_dataset.columns import CLIP_COLUMNS

    rows = runner.first_rows(runner.load_dataset_rows(runner.RunConfig(model="bench", output_dir="unused", dataset=source)), dialogues)
    (out / "clips").mkdir(parents=True, exist_ok=True)
    lines, digests = [], []
    for k in range(len(rows)):
        row = rows[k]
        dialogue = runner.dialogue_from_row(row, SAMPLING_RATE)
        pcm = {c: np.round(np.clip(dialogue.clips[c].array, -1.0, 1.0) * 32767.0).astype("<i2") for c in CLIP_COLUMNS}
        path = out / "clips" / f"{k:05d}.npz"
        np.savez_compressed(path, **pcm)
        digests.append(hashlib.sha256(path.read_bytes()).hexdigest())
        lines.append(json.dumps({key: value for key, value in row.items() if key not in CLIP_COLUMNS}, sort_keys=True, default=str))
    (out / "dialogues.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    manifest = {"format": CLIPS_FORMAT, "sampling_rate": SAMPLING_RATE, "source": str(source), "dialogues": len(lines), "clip_sha256": digests}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1), encoding="utf-8")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    logger.info("wrote %d dialogues to %s (%.1f MB)", len(lines), out, size / 1e6)
    return out


class PreparedDialogues:
    """The runner's view of a pre-decoded clip folder: rows by index, a column by name, select, a content fingerprint.

    Each access decodes the clip file afresh (a new array per clip, as a real loader gives),
    so per-clip memos of one run never carry over into the next.
    """

    def __init__(self, folder: Path, indices: list[int] | None = None) -> None:
        from speecheq_dataset.columns import CLIP_COLUMNS

        self.folder = Path(folder)
        manifest_path = self.folder / "manifest.json"
        if not manifest_path.is_file():
            raise FileNotFoundError(f"{self.folder}: no manifest.json; make the folder with `bench_gpu.py prepare`")
        self.manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if self.manifest.get("format") != CLIPS_FORMAT:
            raise ValueError(f"{self.folder}: clip folder format {self.manifest.get('format')!r}, this bench reads {CLIPS_FORMAT}")
        lines = (self.folder / "dialogues.jsonl").read_text(encoding="utf-8").splitlines()
        self._fields = [json.loads(line) for line in lines if line.strip()]
        self.indices = list(range(len(self._fields))) if indices is None else list(indices)
        self.column_names = list(self._fields[0]) + list(CLIP_COLUMNS) if self._fields else list(CLIP_COLUMNS)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, key):
        if isinstance(key, str):
            return [self._fields[i][key] for i in self.indices]
        import numpy as np

        k = self.indices[key]
        row = dict(self._fields[k])
        with np.load(self.folder / "clips" / f"{k:05d}.npz") as clips:
            for column in clips.files:
                row[column] = {"array": clips[column].astype(np.float32) / 32767.0, "sampling_rate": self.manifest["sampling_rate"]}
        return row

    def select(self, indices) -> PreparedDialogues:
        return PreparedDialogues(self.folder, [self.indices[i] for i in indices])

    def content_fingerprint(self) -> str:
        digest = hashlib.sha256()
        for i in self.indices:
            digest.update(json.dumps(self._fields[i], sort_keys=True).encode())
            digest.update(self.manifest["clip_sha256"][i].encode())
        return digest.hexdigest()[:16]


# ---------------------------------------------------------------- the model


def build_loaded(family: str, shape: str, device: str, dtype: str, seed: int = 0):
    """A seeded random-weight model of `family` built on `device`, with its processor (a `LoadedModel`).

    shape "tiny": the test models of eval_scripts/models/tiny.py; "full" (alias "7b" for
    Qwen2.5-Omni): transformers' config defaults, i.e. the released checkpoint's shape. Both
    use the tiny tokenizer (prompts get realistic token counts; its ids sit inside any vocabulary).
    """
    import torch
    import transformers

    from eval_scripts.models import hf_audio_lm
    from eval_scripts.models import hf_families
    from eval_scripts.models import tiny

    facts = hf_families.family(family)
    torch_dtype = getattr(torch, dtype)
    if shape == "tiny":
        loaded = tiny.build_tiny(family, seed=seed)
        loaded.model.to(device=device, dtype=torch_dtype)
        return loaded
    if shape == "7b" and family != "qwen2.5-omni":
        raise ValueError("--shape 7b is the Qwen2.5-Omni-7B thinker; use --shape full for the defaults of other families")
    processor = tiny.tiny_processor(family)
    tokenizer = processor.tokenizer
    config_class = getattr(transformers, facts.model_class.replace("ForConditionalGeneration", "Config"))
    config = config_class(**hf_families.config_token_ids(facts, tokenizer))
    text = config.get_text_config()
    text.pad_token_id, text.eos_token_id = tokenizer.pad_token_id, tokenizer.eos_token_id
    model = tiny.seeded_model(getattr(transformers, facts.model_class), config, seed, device=device, dtype=torch_dtype)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    parameters = sum(p.numel() for p in model.parameters())
    return hf_audio_lm.LoadedModel(
        model=model,
        processor=processor,
        description={"pretrained": f"random-{shape}", "weights": "random weights from transformers' config defaults (answers are meaningless)",
                     "architecture": facts.model_class, "parameters": int(parameters), "init_seed": seed},
        label_note=f"random weights, {shape} shape",
    )


def build_adapter(family: str, shape: str, device: str, dtype: str, max_new_tokens: int, seed: int = 0):
    """The project's adapter (speed-ups and all) around `build_loaded`'s model."""
    from eval_scripts.models import hf_audio_lm

    loaded = build_loaded(family, shape, device, dtype, seed)
    adapter_class = next(c for c in hf_audio_lm.HFAudioLM.__subclasses__() if c.family == family)
    return adapter_class.from_loaded(loaded, f"{family} ({loaded.label_note})", max_new_tokens=max_new_tokens, seed=seed)


def text_decoder(model):
    """(decoder module, its config) of a thinker or Qwen2-Audio model (transformers >= 5.24 layout, else older)."""
    inner = getattr(model, "model", model)
    decoder = getattr(inner, "language_model", inner)
    return decoder, model.config.get_text_config()


def audio_tower(model):
    inner = getattr(model, "model", model)
    return getattr(inner, "audio_tower", None) or getattr(model, "audio_tower", None)


# ---------------------------------------------------------------- timing


class Phases:
    """Seconds per phase of a run, with the device synchronised at every boundary (so the split is true on a GPU).

    Nothing is hooked inside the compiled decode step: prefill is transformers' `_prefill`,
    decode the rest of `generate`; the audio encoder is timed by hooks on its tower (never
    called while decoding); logprob's forward by hooks added for logprob runs only.
    """

    def __init__(self, adapter, sync) -> None:
        from eval_scripts import prefetch

        self.sync = sync
        self.totals: dict[str, float] = defaultdict(float)
        self.steps = 0  # decode steps (batch-wide), summed over generate calls
        self.rows_steps = 0  # decode steps x rows
        self.generate_calls = 0
        model = adapter.model
        self._time(adapter, "encode", "inputs")
        self._time(adapter, "generate", "answer")
        self._time(adapter, "score", "answer")
        if hasattr(model, "_prefill"):
            self._time(model, "_prefill", "prefill")
        generate = model.generate

        def counted_generate(*args, **kwargs):
            began = self._now()
            out = generate(*args, **kwargs)
            self.totals["generate"] += self._now() - began
            prompt = kwargs["input_ids"].shape[1] if "input_ids" in kwargs else args[0].shape[1]
            sequences = out if hasattr(out, "shape") else out.sequences
            self.steps += max(0, sequences.shape[1] - prompt - 1)
            self.rows_steps += max(0, sequences.shape[1] - prompt - 1) * sequences.shape[0]
            self.generate_calls += 1
            return out

        model.generate = counted_generate
        tower = audio_tower(model)
        if tower is not None:
            self._hook(tower, "audio_encoder")
        self._model = model
        self._forward_hooks: list = []
        load_ahead = prefetch.load_ahead
        prefetch.load_ahead = lambda *args, **kwargs: time_waits(load_ahead(*args, **kwargs), self._waited)

    def _now(self) -> float:
        self.sync()
        return time.perf_counter()

    def _time(self, owner, name: str, phase: str) -> None:
        time_calls(owner, name, lambda seconds: self._add(phase, seconds), clock=self._now)

    def _add(self, phase: str, seconds: float) -> None:
        self.totals[phase] += seconds

    def _waited(self, index: int, seconds: float) -> None:
        self.totals["wait"] += seconds
        if index == 0:  # nothing runs yet that the first chunk's loading could hide behind
            self.totals["first_wait"] += seconds

    def _hook(self, module, phase: str) -> list:
        started: list[float] = []

        def before(m, args):
            started.append(self._now())

        def after(m, args, output):
            self.totals[phase] += self._now() - started.pop()

        return [module.register_forward_pre_hook(before), module.register_forward_hook(after)]

    def time_forward(self, on: bool) -> None:
        """Hooks on the whole model's forward (logprob runs only: in generate runs they would sit in the compiled step)."""
        for handle in self._forward_hooks:
            handle.remove()
        self._forward_hooks = self._hook(self._model, "forward") if on else []

    def reset(self) -> None:
        self.totals = defaultdict(float)
        self.steps = self.rows_steps = self.generate_calls = 0

    def per_query_ms(self, wall: float, queries: int, mode: str) -> dict[str, float]:
        t = self.totals
        model_call = t["generate"] if mode == "generate" else t["forward"]
        prefill = t["prefill"] if mode == "generate" else t["forward"]
        phases = {
            "loader_wait": t["wait"],
            "inputs": t["inputs"],
            "audio_encoder": t["audio_encoder"],
            "text_prefill": max(prefill - t["audio_encoder"], 0.0),
            "decode": max(t["generate"] - t["prefill"], 0.0) if mode == "generate" else 0.0,
            "adapter_rest": max(t["answer"] - t["inputs"] - model_call, 0.0),
            "runner": max(wall - t["answer"] - t["wait"], 0.0),
        }
        return {name: round(1000 * seconds / max(queries, 1), 3) for name, seconds in phases.items()}


# ---------------------------------------------------------------- figures


def device_peaks(name: str, tflops: float | None, bandwidth: float | None) -> tuple[float | None, float | None, str]:
    for fragment, (peak_tflops, peak_tbs) in GPU_PEAKS.items():
        if fragment in name:
            return tflops or peak_tflops, bandwidth or peak_tbs, f"spec sheet ({fragment})" if not (tflops and bandwidth) else "given"
    return tflops, bandwidth, "given" if tflops or bandwidth else "unknown device: pass --peak-tflops / --peak-bandwidth"


def decoder_sizes(model) -> dict:
    """Parameter counts and shapes the roofline figures need."""
    decoder, text = text_decoder(model)
    embed = decoder.get_input_embeddings()
    head = model.lm_head
    layer_params = sum(p.numel() for p in decoder.parameters()) - embed.weight.numel()
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    return {
        "layer_params": int(layer_params),
        "head_params": int(head.weight.numel()),
        "bytes_per_param": model.lm_head.weight.element_size(),
        "layers": int(text.num_hidden_layers),
        "hidden": int(text.hidden_size),
        "attention_width": int(text.num_attention_heads * head_dim),
        "kv_width": int(text.num_key_value_heads * head_dim),
    }


def prefill_flops(sizes: dict, prompt_tokens: list[int]) -> float:
    """Text-prefill FLOPs: 2 x params x tokens for the layers, causal attention 2 x layers x T^2 x width, the head on one position."""
    total = 0.0
    for n in prompt_tokens:
        total += 2.0 * sizes["layer_params"] * n + 2.0 * sizes["layers"] * n * n * sizes["attention_width"] + 2.0 * sizes["head_params"]
    return total


def decode_step_bytes(sizes: dict, rows: float, context: float) -> float:
    """Bytes one batch-wide decode step must read at least: the layers' and head's weights once, each row's KV cache."""
    weights = (sizes["layer_params"] + sizes["head_params"]) * sizes["bytes_per_param"]
    kv = rows * context * sizes["layers"] * 2 * sizes["kv_width"] * sizes["bytes_per_param"]
    return weights + kv


@dataclass
class RunFigures:
    mode: str
    batch_size: int
    dialogues: int
    queries: int
    wall_s: float
    figures: dict = field(default_factory=dict)


def run_once(adapter, rows, mode: str, batch_size: int, phases: Phases, sync, args, out_dir: Path, sizes: dict, peaks) -> tuple[RunFigures, list]:
    """One runner run; returns its figures and its answers (uid, choice, raw)."""
    import torch

    from eval_scripts import runner
    from eval_scripts import store

    on_cuda = torch.cuda.is_available() and adapter.model.device.type == "cuda"
    if on_cuda:
        torch.cuda.reset_peak_memory_stats()
    phases.reset()
    phases.time_forward(mode == "logprob")
    config = runner.RunConfig(model=adapter.name, output_dir=str(out_dir), batch_size=batch_size, choice_mode=mode, n_bootstrap=0,
                              overwrite=True, prefetch=args.prefetch, loader_workers=args.loader_workers)
    sync()
    began = time.perf_counter()
    results = runner.run(config, model=adapter, dataset=rows, progress=False)
    sync()
    wall = time.perf_counter() - began
    phases.time_forward(False)
    records = store.read_samples(out_dir)
    rounds = [r for _, r in store.iter_rounds(records)]
    queries = len(rounds)
    output_tokens = sum(r.output_tokens or 0 for r in rounds)
    prompt_tokens = [r.input_tokens or 0 for r in rounds]
    figures = {
        "dialogues_per_s": len(records) / wall,
        "queries_per_s": queries / wall,
        "output_tokens_per_s": output_tokens / wall,
        "ms_per_query": phases.per_query_ms(wall, queries, mode),
        "loader_wait_share": phases.totals["wait"] / wall,
        # the same without the first chunk, whose loading nothing can overlap (a run of one chunk has none left)
        "loader_wait_share_after_first_chunk": (phases.totals["wait"] - phases.totals["first_wait"]) / wall,
        "mean_prompt_tokens": sum(prompt_tokens) / max(queries, 1),
        "failed_dialogues": len(results["failed_dialogues"]),
        "loader_workers": results["deployment"]["session"].get("loader_workers"),
    }
    prefill_s = (phases.totals["prefill"] if mode == "generate" else phases.totals["forward"]) - phases.totals["audio_encoder"]
    if prefill_s > 0:
        tflops = prefill_flops(sizes, prompt_tokens) / prefill_s / 1e12
        figures["prefill_tflops"] = tflops
        figures["prefill_ms_per_1600_tokens"] = 1000 * prefill_s / max(sum(prompt_tokens), 1) * 1600
        if peaks[0]:
            figures["prefill_vs_peak"] = tflops / peaks[0]
    if mode == "generate" and phases.steps:
        step_s = (phases.totals["generate"] - phases.totals["prefill"]) / phases.steps
        rows_per_step = phases.rows_steps / phases.steps
        context = figures["mean_prompt_tokens"] + args.max_new_tokens / 2
        figures["decode_ms_per_step"] = 1000 * step_s
        figures["decode_rows_per_step"] = rows_per_step
        if peaks[1]:
            limit_s = decode_step_bytes(sizes, rows_per_step, context) / (peaks[1] * 1e12)
            figures["decode_limit_ms_per_step"] = 1000 * limit_s
            figures["decode_vs_limit"] = step_s / limit_s
    if on_cuda:
        figures["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    answers = [(r.uid, r.choice, r.raw) for r in rounds]
    return RunFigures(mode, batch_size, len(records), queries, wall, figures), answers


def agreement(answers: dict, mode: str) -> dict:
    """Per batch size: the share of the rounds it shares with the smallest batch size's run whose choice (and text) is identical."""
    sizes = sorted(b for (m, b) in answers if m == mode)
    if len(sizes) < 2:
        return {}
    reference = {uid: (choice, raw) for uid, choice, raw in answers[(mode, sizes[0])]}
    out = {}
    for b in sizes[1:]:
        common = [(reference[uid], (choice, raw)) for uid, choice, raw in answers[(mode, b)] if uid in reference]
        out[f"{sizes[0]}_vs_{b}"] = {
            "rounds": len(common),
            "same_choice": sum(a[0] == c[0] for a, c in common) / max(len(common), 1),
            **({"same_text": sum(a[1] == c[1] for a, c in common) / max(len(common), 1)} if mode == "generate" else {}),
        }
    return out


def warm_up(adapter, rows, mode: str, batch_size: int) -> float:
    """First-call costs out of the way at this batch size (transformers compiles the decode step per shape):
    the dataset's longest query, repeated, so the static cache gets its largest size now and is reused after."""
    from eval_scripts import protocol
    from eval_scripts import runner
    from eval_scripts.prompts import load_template

    template = load_template()
    settings = protocol.ProtocolSettings(template=template, system=template["system"])
    trajectory = protocol.Trajectory(mode, "random", 0)
    longest = None
    for k in range(len(rows)):
        dialogue = runner.dialogue_from_row(rows[k], adapter.sampling_rate)
        query = protocol.build_query(settings, dialogue, 2, trajectory, "high")
        if longest is None or protocol.query_size(query) > protocol.query_size(longest):
            longest = query
    began = time.perf_counter()
    (adapter.generate if mode == "generate" else adapter.score)([longest] * batch_size)
    return time.perf_counter() - began


def require_transformers(minimum: str) -> None:
    """Stop with one line when the installed transformers is older than `minimum` (5.17's Omni thinker and processor differ)."""
    import transformers

    def parts(version: str) -> tuple[int, ...]:
        return tuple(int(p) for p in version.split(".")[:2] if p.isdigit())

    if parts(transformers.__version__) < parts(minimum):
        raise SystemExit(f"bench_gpu: transformers {transformers.__version__} at {Path(transformers.__file__).parent} is older than {minimum}; "
                         "install the carried wheels into a --target folder and put it first on PYTHONPATH (docs/runner.md, GPU bench)")


def versions() -> dict:
    import torch

    out = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda}
    for name in ("transformers", "accelerate", "numpy", "tokenizers", "huggingface_hub"):
        try:
            module = __import__(name)
            out[name] = getattr(module, "__version__", None)
        except ImportError:
            out[name] = None
    return out


def run(args) -> dict:
    import torch

    from eval_scripts import runner

    out_dir = Path(args.output)
    out_dir.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(out_dir / "bench_gpu.log", mode="w", encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    gpu = torch.cuda.get_device_name(0) if device.startswith("cuda") else platform.processor() or "cpu"
    peaks = device_peaks(gpu, args.peak_tflops, args.peak_bandwidth) if device.startswith("cuda") else (args.peak_tflops, args.peak_bandwidth, "cpu")
    dtype = args.dtype or ("bfloat16" if device.startswith("cuda") else "float32")
    rows = PreparedDialogues(Path(args.clips))
    rows = rows.select(range(min(args.dialogues, len(rows))))
    require_transformers("5.24")
    began = time.perf_counter()
    adapter = build_adapter(args.family, args.shape, device, dtype, args.max_new_tokens, seed=args.seed)
    build_s = time.perf_counter() - began
    description = adapter.describe()
    sizes = decoder_sizes(adapter.model)
    logger.info("%s on %s (%s), %s, %d dialogues, max_new_tokens %d; speed-ups: %s%s", description["label"], gpu, device, dtype, len(rows),
                args.max_new_tokens, ", ".join(description.get("speedups", [])) or "none",
                f" (off: {description['speedups_off']})" if description.get("speedups_off") else "")
    phases = Phases(adapter, sync)
    report = {
        "config": {k: v for k, v in vars(args).items() if k != "func"} | {"device": device, "dtype": dtype},
        "device": {"name": gpu, "peak_tflops": peaks[0], "peak_bandwidth_tb_s": peaks[1], "peaks_from": peaks[2]},
        "versions": versions(),
        "git_hash": runner.git_hash(),
        "model": description,
        "decoder": sizes,
        "build_s": build_s,
        "runs": [],
        "agreement": {},
    }
    answers: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-gpu-") as tmp:
        # Start-up costs (imports, the loader's worker processes, first calls) out of every measured run.
        began = time.perf_counter()
        runner.run(runner.RunConfig(model=adapter.name, output_dir=str(Path(tmp) / "start"), choice_mode="logprob", n_bootstrap=0,
                                    prefetch=args.prefetch, loader_workers=args.loader_workers), model=adapter, dataset=rows.select(range(1)), progress=False)
        report["start_up_s"] = time.perf_counter() - began
        for mode in args.modes:
            for batch_size in args.batch_sizes:
                subset = rows
                if mode == "generate" and batch_size == 1 and args.batch1_limit:
                    subset = rows.select(range(min(args.batch1_limit, len(rows))))  # the budget: batch 1 is the slow run
                warm_s = warm_up(adapter, subset, mode, batch_size)
                figures, answers[(mode, batch_size)] = run_once(adapter, subset, mode, batch_size, phases, sync, args,
                                                                Path(tmp) / f"{mode}-b{batch_size}", sizes, peaks)
                entry = {"mode": mode, "batch_size": batch_size, "dialogues": figures.dialogues, "queries": figures.queries,
                         "wall_s": figures.wall_s, "warm_up_s": warm_s, **figures.figures}
                report["runs"].append(entry)
                logger.info("%s", _run_line(entry))
            report["agreement"][mode] = agreement(answers, mode)
            for pair, share in report["agreement"][mode].items():
                logger.info("%s: batch %s: %s", mode, pair.replace("_vs_", " vs "), json.dumps(share))
    _speedup_table(report)
    report["compiled_decode_step"] = hasattr(adapter.model, "_compiled_call")
    if not device.startswith("cuda"):
        import resource

        report["peak_rss_gib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    path = out_dir / "bench_gpu.json"
    tmp_path = path.with_suffix(".json.tmp")
    tmp_path.write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")
    os.replace(tmp_path, path)
    logger.info("wrote %s and %s", path, out_dir / "bench_gpu.log")
    logger.removeHandler(handler)
    handler.close()
    return report


def _run_line(entry: dict) -> str:
    phases = ", ".join(f"{k} {v:.1f}" for k, v in entry["ms_per_query"].items())
    parts = [f"{entry['mode']:8s} batch {entry['batch_size']:3d}: {entry['dialogues_per_s']:.3f} dialogues/s, {entry['queries_per_s']:.3f} queries/s, "
             f"{entry['output_tokens_per_s']:.1f} output tokens/s ({entry['dialogues']} dialogues, {entry['wall_s']:.1f} s; warm-up {entry['warm_up_s']:.1f} s)",
             f"    ms/query: {phases}; loader wait {100 * entry['loader_wait_share']:.1f} % of the wall time "
             f"({100 * entry['loader_wait_share_after_first_chunk']:.1f} % after the first chunk)"]
    if "decode_ms_per_step" in entry:
        limit = f" vs bandwidth limit {entry['decode_limit_ms_per_step']:.2f} ms ({entry['decode_vs_limit']:.1f}x)" if "decode_limit_ms_per_step" in entry else ""
        parts.append(f"    decode {entry['decode_ms_per_step']:.2f} ms per step ({entry['decode_rows_per_step']:.1f} rows){limit}")
    if "prefill_tflops" in entry:
        peak = f" = {100 * entry['prefill_vs_peak']:.0f} % of peak" if "prefill_vs_peak" in entry else ""
        parts.append(f"    text prefill {entry['prefill_tflops']:.2f} TFLOP/s{peak}; {entry['prefill_ms_per_1600_tokens']:.1f} ms per 1,600 tokens")
    if "peak_memory_gib" in entry:
        parts.append(f"    peak memory {entry['peak_memory_gib']:.1f} GiB")
    return "\n".join(parts)


def _speedup_table(report: dict) -> None:
    """dialogues/s of each run against the generate batch-1 run (the benchmark authors' single stream)."""
    base = next((r for r in report["runs"] if r["mode"] == "generate" and r["batch_size"] == 1), None)
    for entry in report["runs"]:
        if base:
            entry["vs_single_stream"] = entry["dialogues_per_s"] / base["dialogues_per_s"]
    logger.info("| run | dialogues/s | vs single stream | notes |\n|---|---|---|---|")
    for entry in report["runs"]:
        note = f"decode {entry['decode_ms_per_step']:.1f} ms/step" if "decode_ms_per_step" in entry else (
            f"prefill {entry.get('prefill_ms_per_1600_tokens', 0):.0f} ms per 1,600 tokens")
        ratio = f"{entry['vs_single_stream']:.1f}x" if "vs_single_stream" in entry else "-"
        logger.info("| %s, batch %d | %.3f | %s | %s |", entry["mode"], entry["batch_size"], entry["dialogues_per_s"], ratio, note)


# ---------------------------------------------------------------- CLI


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    prep = sub.add_parser("prepare", help="decode dialogues to a clip folder (needs the project's full environment)")
    prep.add_argument("--source", default=str(ROOT.parent / "shared" / "data" / "speecheq-arena-v1"), help="any --dataset source of the runner")
    prep.add_argument("--dialogues", type=int, default=32)
    prep.add_argument("--out", default=str(ROOT / ".bench-clips"), help="an ignored folder of the checkout (default .bench-clips)")
    go = sub.add_parser("run", help="measure")
    go.add_argument("--clips", default=str(ROOT / ".bench-clips"), help="a folder made by `prepare`")
    go.add_argument("--shape", choices=("7b", "full", "tiny"), default="7b", help="7b: the Qwen2.5-Omni-7B thinker's shape; tiny: the CPU test model")
    go.add_argument("--family", default="qwen2.5-omni", help="qwen2.5-omni, qwen3-omni or qwen2-audio")
    go.add_argument("--device", default=None, help="default: cuda when there is one, else cpu")
    go.add_argument("--dtype", default=None, help="default: bfloat16 on cuda, float32 on cpu")
    go.add_argument("--dialogues", type=int, default=32)
    go.add_argument("--max-new-tokens", type=int, default=128)
    go.add_argument("--batch-sizes", type=_ints, default=[1, 8, 32])
    go.add_argument("--modes", type=lambda s: [m for m in s.split(",") if m], default=["generate", "logprob"])
    go.add_argument("--batch1-limit", type=int, default=None, help="budget: dialogues of the (slow) generate batch-1 run; agreement is compared on those")
    go.add_argument("--prefetch", type=int, default=None, help="the runner's --prefetch (default: its own)")
    go.add_argument("--loader-workers", type=int, default=None, help="the runner's --loader-workers (default: its own: up to 4 on a GPU, 0 on CPU)")
    go.add_argument("--peak-tflops", type=float, default=None, help="dense bf16 TFLOP/s of the device (default: spec sheet by name)")
    go.add_argument("--peak-bandwidth", type=float, default=None, help="memory TB/s of the device (default: spec sheet by name)")
    go.add_argument("--seed", type=int, default=0)
    go.add_argument("--output", default=str(ROOT / "runs" / "bench-gpu"))
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logger.setLevel(logging.INFO)
    stdout = logging.StreamHandler(sys.stdout)
    stdout.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(stdout)
    logger.propagate = False
    if args.command == "prepare":
        prepare_clips(args.source, Path(args.out), args.dialogues)
    else:
        run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
