"""The evaluation runner: dataset -> prompts -> model -> parsed choices -> run directory.

Sharded with accelerate (each process takes a contiguous slice of the pending
dialogues), batched (longest queries first, results back in input order),
resumable (per-rank append-only JSONL) and tolerant of broken clips (the
dialogue fails with an error naming the clip; the run goes on).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from eval_scripts import batching
from eval_scripts import protocol
from eval_scripts import prefetch
from eval_scripts import scoring
from eval_scripts import store
from eval_scripts.models.base import ChoiceModel
from eval_scripts.models.base import ChoiceQuery
from eval_scripts.models.base import Clip
from eval_scripts.models.base import ModelOutput
from eval_scripts.models.base import build_model
from eval_scripts.parsing import parse_answer
from eval_scripts.prompts import load_template
from eval_scripts.prompts import persona_text
from eval_scripts.prompts import prompt_hash
from speecheq_dataset.columns import CLIP_COLUMNS
from speecheq_dataset.columns import TEXT_COLUMNS
from speecheq_dataset.columns import TONE_COLUMNS

logger = logging.getLogger(__name__)

SAMPLES_FILE = store.SAMPLES_FILE
RESULTS_FILE = store.RESULTS_FILE
# Settings that may change between a run and its resumption without changing any answer.
# (The dataset is identified by its content fingerprint, not by the path or Hub id it came from.)
RESUMABLE_CHANGES = ("batch_size", "prefetch", "loader_workers", "limit", "overwrite", "output_dir", "dataset")
# Allowed values of the protocol options (the CLI offers exactly these).
INFERENCES = ("sequential", "direct")
HISTORIES = ("audio", "text")
ORDERS = ("random", "both")
CHOICE_MODES = ("generate", "logprob", "both")
VERSION_PACKAGES = ("speecheq", "torch", "transformers", "accelerate", "datasets", "numpy", "evaluate", "torchcodec")


class DialogueError(RuntimeError):
    """A dialogue that cannot be evaluated (a clip missing or undecodable); the message names it."""


@dataclass
class RunConfig:
    """Every option of a run (the CLI fills it; tests build it directly)."""

    model: str
    output_dir: str
    dataset: str | None = None
    model_args: dict = field(default_factory=dict)
    limit: int | None = None
    seed: int = 0
    batch_size: int | str = 1  # or "auto": the largest that fits (eval_scripts/batching.py)
    prefetch: int | None = None  # chunks of dialogues loaded ahead in a background thread; None: 1 on a GPU, 0 on CPU
    loader_workers: int | None = None  # processes that decode and prepare clips; None: up to 4 on a GPU, 0 on CPU
    inference: str = "sequential"
    history: str = "audio"
    orders: str = "random"
    num_runs: int = 1
    persona: str | None = None
    prompt_file: str | None = None
    choice_mode: str = "generate"  # "generate", "logprob" or "both"
    oracle: bool = False
    overwrite: bool = False
    price_in: float | None = None  # USD per million input tokens
    price_out: float | None = None  # USD per million output tokens
    n_bootstrap: int = 1000

    @property
    def modes(self) -> list[str]:
        return ["generate", "logprob"] if self.choice_mode == "both" else [self.choice_mode]

    def validate(self) -> None:
        """Reject impossible settings with a message naming the option."""
        checks = {
            "inference": (self.inference, INFERENCES),
            "history": (self.history, HISTORIES),
            "orders": (self.orders, ORDERS),
            "choice_mode": (self.choice_mode, CHOICE_MODES),
        }
        for name, (value, allowed) in checks.items():
            if value not in allowed:
                raise ValueError(f"--{name.replace('_', '-')} must be one of {', '.join(allowed)}; got {value!r}")
        batching.parse_batch_size(self.batch_size)
        if self.loader_workers is not None and self.loader_workers < 0:
            raise ValueError(f"--loader-workers must be >= 0, got {self.loader_workers}")
        if self.prefetch is not None and self.prefetch < 0:
            raise ValueError(f"--prefetch must be >= 0, got {self.prefetch}")
        if self.num_runs < 1:
            raise ValueError(f"--num-runs must be >= 1, got {self.num_runs}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be >= 1, got {self.limit}")

    def public(self) -> dict:
        """The config as recorded in results.json (model args without secret-looking keys)."""
        out = dataclasses.asdict(self)
        out["model_args"] = redact(self.model_args)
        out.pop("n_bootstrap")
        out.pop("overwrite")
        return out


def redact(args: dict) -> dict:
    """Model args safe to write: values of keys that look like credentials are dropped."""
    secret_words = ("key", "token", "secret", "password", "auth")
    return {k: ("<redacted>" if any(w in k.lower() for w in secret_words) else v) for k, v in args.items()}


def make_accelerator():
    """An Accelerator that shards on CPU too (cpu=True when no GPU, else both processes would do everything)."""
    import torch
    from accelerate import Accelerator

    return Accelerator(cpu=not torch.cuda.is_available())


# ---------------------------------------------------------------- dialogues


def dialogue_from_row(row: dict, sampling_rate: int | None) -> protocol.Dialogue:
    """Decode the eight clips of a row (undecoded audio cells); DialogueError names a bad clip."""
    from speecheq_dataset.audio import decode_value

    dialogue_id = str(row["id"])
    clips: dict[str, Clip] = {}
    for column, tone_column in zip(CLIP_COLUMNS, TONE_COLUMNS):
        cell = row.get(column)
        where = f"dialogue {dialogue_id}, clip {column}"
        if isinstance(cell, dict) and cell.get("path"):
            where += f" ({cell['path']})"
        if cell is None:
            raise DialogueError(f"{where}: missing clip")
        try:
            array, rate = decode_value(cell, sampling_rate, name=where)
        except Exception as exc:  # every decode failure becomes a failed dialogue, named
            raise DialogueError(str(exc) if where in str(exc) else f"{where}: {exc}") from exc
        turn = int(column[4])
        clips[column] = Clip(
            array=array,
            sampling_rate=rate,
            column=column,
            text=str(row.get(f"turn{turn}_text") or ""),
            tone=str(row.get(tone_column) or ""),
        )
    fields = {name: row.get(name) for name in protocol.SCENE_FIELDS + TEXT_COLUMNS}
    return protocol.Dialogue(id=dialogue_id, subscale=str(row["subscale"]), fields=fields, clips=clips)


def load_dialogues(
    dataset, indices: list[int], model: ChoiceModel, prepare_for: protocol.ProtocolSettings | None = None
) -> tuple[list[protocol.Dialogue], list[dict]]:
    """Decode the rows at `indices`; undecodable ones become failed records.

    With `prepare_for`, the model also prepares the clips those settings' queries will hear (the loader thread's share).
    """
    dialogues, failed = [], []
    for k in indices:
        row = dataset[k]
        try:
            dialogue = dialogue_from_row(row, model.sampling_rate)
        except DialogueError as exc:
            logger.error("%s", exc)
            failed.append({"id": str(row["id"]), "subscale": str(row["subscale"]), "status": "failed", "error": str(exc), "trajectories": []})
            continue
        if prepare_for is not None:
            model.prepare_clips(protocol.heard_clips(prepare_for, dialogue))
        dialogues.append(dialogue)
    return dialogues, failed


# ---------------------------------------------------------------- model calls


def query_size(query: ChoiceQuery) -> float:
    """Rough prompt length in tokens (audio ~25 tokens/s, text ~4 chars/token), for longest-first batching."""
    audio_s = sum(p.clip.duration_s for p in query.parts if p.kind == "audio" and p.clip is not None)
    chars = len(query.system) + sum(len(p.text) for p in query.parts if p.kind == "text")
    return 25.0 * audio_s + chars / 4.0


def call_model(model: ChoiceModel, mode: str, queries: list[ChoiceQuery], batch_size: int | batching.BatchSize) -> list[tuple[ModelOutput, float]]:
    """Outputs in input order, batched longest-first; each with its share of the batch's wall time.

    An adapter exception on a batch is retried query by query; a query that still fails gets its error recorded.
    """
    order = sorted(range(len(queries)), key=lambda i: (-query_size(queries[i]), i))
    results: list[tuple[ModelOutput, float] | None] = [None] * len(queries)
    sizer = batch_size if isinstance(batch_size, batching.BatchSize) else batching.BatchSize(batch_size)
    start = 0
    while start < len(order):
        idx = order[start : start + sizer.size]
        batch = [queries[i] for i in idx]
        began = time.perf_counter()
        try:
            outputs = _answer(model, mode, batch)
        except Exception as exc:
            if sizer.shrink(exc, len(idx)):  # --batch-size auto ran out of memory: the same queries again, in smaller batches
                continue
            # Retry one by one, so one bad query fails alone and results stay batch-independent.
            logger.exception("model %s failed on a batch of %d (%s ...); retrying one query at a time", model.name, len(batch), batch[0].uid)
            outputs = []
            for query in batch:
                try:
                    outputs += _answer(model, mode, [query])
                except Exception as exc:
                    logger.error("model %s failed on %s: %s: %s", model.name, query.uid, type(exc).__name__, exc)
                    outputs.append(ModelOutput(error=f"{type(exc).__name__}: {exc}"))
        share = (time.perf_counter() - began) / len(batch)
        for i, output in zip(idx, outputs):
            if not output.latency_s:
                output.latency_s = share * len(batch)
            results[i] = (output, share)
        start += len(idx)
    return results  # type: ignore[return-value]


def _answer(model: ChoiceModel, mode: str, batch: list[ChoiceQuery]) -> list[ModelOutput]:
    outputs = model.generate(batch) if mode == "generate" else model.score(batch)
    if len(outputs) != len(batch):
        raise RuntimeError(f"adapter {model.name!r} returned {len(outputs)} outputs for {len(batch)} queries")
    return outputs


def round_entry(query: ChoiceQuery, mode: str, output: ModelOutput, compute_s: float) -> dict:
    """What samples.jsonl keeps of one answered query."""
    if output.error:
        choice, status, detail = None, "error", output.error
    elif mode == "logprob" and output.text is None:
        choice = output.choice if output.choice in (1, 2) else None
        status, detail = ("logprob" if choice else "invalid"), ""
    else:
        parsed = parse_answer(output.text)
        choice, status, detail = parsed.choice, parsed.status, parsed.detail
    levels = query.meta["levels"]
    level = protocol.selected_level(levels, choice)
    return {
        "round": query.meta["round"],
        "turn": query.meta["turn"],
        "uid": query.uid,
        "levels": levels,
        "turn4_in_context": query.meta["turn4_in_context"],
        "raw": output.text,
        "parse_status": status,
        "parse_detail": detail,
        "choice": choice,
        "selected_level": level,
        "correct": level == "high",
        "option_logprobs": list(output.option_logprobs) if output.option_logprobs else None,
        "latency_s": output.latency_s,
        "compute_s": compute_s,
        "input_tokens": output.input_tokens,
        "output_tokens": output.output_tokens,
        "cost_usd": output.cost_usd,
        "error": output.error,
    }


def evaluate_chunk(
    model: ChoiceModel,
    settings: protocol.ProtocolSettings,
    dialogues: list[protocol.Dialogue],
    trajectories: list[protocol.Trajectory],
    batch_size: int | batching.BatchSize,
) -> list[dict]:
    """Both rounds of every trajectory of a chunk of dialogues; one record per dialogue.

    Nothing that goes wrong with one query (building it, the model, reading its answer)
    escapes: it becomes that query's recorded error, and its dialogue fails by name.
    """
    rounds: dict[tuple[str, str], list[dict]] = {(d.id, t.key): [] for d in dialogues for t in trajectories}
    broken: dict[str, str] = {}  # dialogue id -> why its queries could not be built
    for round_ in (1, 2):
        for mode in sorted({t.mode for t in trajectories}):
            jobs = []
            for dialogue in (d for d in dialogues if d.id not in broken):
                try:
                    dialogue_jobs = []
                    for traj in (t for t in trajectories if t.mode == mode):
                        turn4 = None
                        if round_ == 2:
                            turn4 = protocol.context_level(settings, rounds[(dialogue.id, traj.key)][0]["selected_level"])
                        dialogue_jobs.append(protocol.build_query(settings, dialogue, round_, traj, turn4))
                except Exception as exc:
                    logger.exception("dialogue %s: cannot build its round-%d queries", dialogue.id, round_)
                    broken[dialogue.id] = f"cannot build round {round_}: {type(exc).__name__}: {exc}"
                    continue
                jobs += dialogue_jobs
            for query, (output, share) in zip(jobs, call_model(model, mode, jobs, batch_size)):
                key = (query.meta["dialogue_id"], query.meta["trajectory"])
                rounds[key].append(safe_round_entry(query, mode, output, share))
    records = []
    for dialogue in dialogues:
        record = {"id": dialogue.id, "subscale": dialogue.subscale, "status": "ok", "error": None, "trajectories": []}
        if dialogue.id in broken:
            record.update(status="failed", error=broken[dialogue.id])
            records.append(record)
            continue
        record["trajectories"] = [
            {"mode": t.mode, "order": t.order, "run": t.run, "rounds": rounds[(dialogue.id, t.key)]} for t in trajectories
        ]
        errors = [rnd for e in record["trajectories"] for rnd in e["rounds"] if rnd["error"]]
        if errors:
            record["status"] = "failed"
            record["error"] = f"model error on {errors[0]['uid']}: {errors[0]['error']}"
        else:
            record["votes"] = {
                mode: dict(zip(("turn4", "turn6"), _levels_of(scoring.dialogue_prediction(record, mode))))
                for mode in sorted({t.mode for t in trajectories})
            }
        records.append(record)
    return records


def safe_round_entry(query: ChoiceQuery, mode: str, output: ModelOutput, compute_s: float) -> dict:
    """round_entry, or, if reading this one answer fails in any way, the same entry recording that error."""
    try:
        return round_entry(query, mode, output, compute_s)
    except Exception as exc:
        logger.exception("query %s: cannot read the model's answer", query.uid)
        failed = ModelOutput(text=output.text if isinstance(output.text, str) else None, latency_s=output.latency_s,
                             error=f"cannot read the answer: {type(exc).__name__}: {exc}")
        return round_entry(query, mode, failed, compute_s)


def _levels_of(votes: list[int]) -> list[str | None]:
    return [{1: "high", 2: "low"}.get(v) for v in votes]


# ---------------------------------------------------------------- the run


def check_model(model: ChoiceModel, config: RunConfig) -> None:
    """Fail early on a model/option combination that cannot work."""
    for mode in config.modes:
        if mode not in model.modes:
            raise ValueError(f"model {config.model!r} has no {mode!r} choice mode (it supports: {', '.join(sorted(model.modes))})")
    if model.needs_text_parts and not (config.oracle and config.history == "text"):
        raise ValueError(f"model {config.model!r} reads text only: run it with --oracle --history text")


def identity(config: RunConfig, fingerprint: str, the_prompt_hash: str) -> dict:
    """What must match for a run directory to be resumed."""
    public = config.public()
    for key in RESUMABLE_CHANGES:
        public.pop(key, None)
    return {"config": public, "dataset_fingerprint": fingerprint, "prompt_hash": the_prompt_hash}


def prepare_run_dir(run_dir: Path, ident: dict, overwrite: bool, is_main: bool) -> None:
    """Refuse to resume into a directory of a different run; wipe it with --overwrite (rank 0 writes)."""
    config_path = run_dir / store.RUN_CONFIG
    if config_path.is_file() and not overwrite:
        previous = json.loads(config_path.read_text(encoding="utf-8"))
        if previous != ident:
            diffs = _differences(previous, ident)
            raise ValueError(
                f"{run_dir} holds a different run ({'; '.join(diffs)}); use another --output-dir, or --overwrite to start over"
            )
    if not is_main:
        return
    if overwrite:
        for name in (store.SHARDS_DIR,):
            shutil.rmtree(run_dir / name, ignore_errors=True)
        for name in (SAMPLES_FILE, RESULTS_FILE, store.RUN_CONFIG):
            (run_dir / name).unlink(missing_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)
    store.remove_stale_temporaries(run_dir)
    store.write_json_atomic(config_path, ident)


def _differences(old: dict, new: dict, prefix: str = "") -> list[str]:
    diffs = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            diffs += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            diffs.append(f"{prefix}{key}: {a!r} before, {b!r} now")
    return diffs


def package_versions() -> dict[str, str | None]:
    versions = {}
    for name in VERSION_PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def git_hash() -> str | None:
    """Commit of the checkout the runner runs from (+ '-dirty' with local changes); None outside git."""
    root = Path(__file__).resolve().parents[1]
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, timeout=10)
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def loading_depth(config: RunConfig, device) -> int:
    """Chunks loaded ahead: --prefetch, else 1 when the model runs on an accelerator and 0 on CPU.

    On a GPU the loader hides clip decoding behind the model. On a CPU it competes with
    torch's own threads for the cores: on 2 cores, generate at batch 8 ran at 0.79x
    (bench/bench_runner.py, item 4), the decode steps slowed by the busy second core.
    """
    if config.prefetch is not None:
        return config.prefetch
    return 0 if getattr(device, "type", "cpu") == "cpu" else 1


def load_dataset_rows(config: RunConfig):
    """The dataset with audio left undecoded (the runner decodes per dialogue, at the model's rate); --limit not applied."""
    import datasets

    from speecheq_dataset.loading import load_speecheq

    ds = load_speecheq(config.dataset)
    for column in CLIP_COLUMNS:
        ds = ds.cast_column(column, datasets.Audio(decode=False))
    return ds


def first_rows(dataset, limit: int | None):
    """The first `limit` rows (all when None)."""
    return dataset if limit is None else dataset.select(range(min(limit, len(dataset))))


def run(config: RunConfig, *, model: ChoiceModel | None = None, dataset=None, progress: bool = True) -> dict | None:
    """Run (or resume) an evaluation; returns results.json's content on the main process, None elsewhere.

    `model` and `dataset` may be given ready-made (tests, the demo); else they come from the config.
    """
    from accelerate.utils import gather_object
    from tqdm.auto import tqdm

    from speecheq_dataset.loading import dataset_fingerprint

    config.validate()
    accelerator = make_accelerator()
    is_main = accelerator.is_main_process
    run_dir = Path(config.output_dir)

    template = load_template(config.prompt_file)
    system = persona_text(config.persona) if config.persona else template["system"]
    the_prompt_hash = prompt_hash(template, system)
    if model is None:
        model = build_model(config.model, **config.model_args)
    check_model(model, config)
    if dataset is None:
        dataset = load_dataset_rows(config)
    # The whole dataset's fingerprint, taken before --limit: a run extended to more dialogues is the same run.
    fingerprint = dataset_fingerprint(dataset)
    dataset = first_rows(dataset, config.limit)
    ident = identity(config, fingerprint, the_prompt_hash)
    prepare_run_dir(run_dir, ident, config.overwrite, is_main)
    accelerator.wait_for_everyone()

    ids = [str(i) for i in dataset["id"]]
    known_ids = set(ids)  # a list lookup per shard record made resuming a large run quadratic
    previous = {}
    for record in store.read_shards(run_dir):
        if record["id"] in known_ids and (record["status"] == "ok" or record["id"] not in previous):
            previous[record["id"]] = record
    done = {i for i, r in previous.items() if r["status"] == "ok"}
    pending = [k for k, i in enumerate(ids) if i not in done]
    if is_main and done:
        logger.info("resuming %s: %d of %d dialogues already done", run_dir, len(done), len(ids))
    # Every rank must have read the shards before any rank appends to its own,
    # or ranks could disagree on what is pending and split the work differently.
    accelerator.wait_for_everyone()

    settings = protocol.ProtocolSettings(
        template=template, system=system, seed=config.seed, inference=config.inference, history=config.history, oracle=config.oracle
    )
    trajectories = protocol.plan_trajectories(config.modes, config.orders, config.num_runs)
    sizer = batching.BatchSize(config.batch_size)  # auto: the size found is kept for the whole run
    chunk_size = sizer.size * 2
    new_records: list[dict] = []
    session_began = time.perf_counter()
    with accelerator.split_between_processes(pending) as mine:
        mine = list(mine)
        bar = tqdm(
            total=len(mine),
            disable=not (is_main and progress),
            unit="dlg",
            desc=f"{config.model} (rank 0 of {accelerator.num_processes})",
            dynamic_ncols=True,
        )
        chunks = [mine[start : start + chunk_size] for start in range(0, len(mine), chunk_size)]
        ahead = loading_depth(config, accelerator.device)
        workers = prefetch.worker_count(config.loader_workers, accelerator.device)
        loaded = prefetch.load_ahead(chunks, load_dialogues, dataset, model, settings, depth=ahead, workers=workers)
        with store.ShardWriter(store.shard_path(run_dir, accelerator.process_index)) as writer, contextlib.closing(loaded):
            for chunk, (dialogues, failed) in zip(chunks, loaded):
                records = evaluate_chunk(model, settings, dialogues, trajectories, sizer) if dialogues else []
                by_id = {r["id"]: r for r in records + failed}
                for k in chunk:  # dataset order within the chunk
                    record = by_id[ids[k]]
                    writer.append(record)
                    new_records.append(record)
                bar.update(len(chunk))
        bar.close()
    gathered = gather_object(new_records) if accelerator.num_processes > 1 else new_records
    accelerator.wait_for_everyone()
    session_wall = time.perf_counter() - session_began
    if not is_main:
        return None
    final = dict(previous)
    for record in gathered:
        if record["status"] == "ok" or final.get(record["id"], {}).get("status") != "ok":
            final[record["id"]] = record
    ordered = [final[i] for i in ids if i in final]
    results = build_results(config, model, ordered, fingerprint, the_prompt_hash, template, accelerator.num_processes)
    # This invocation's throughput over all processes (start-up excluded; resumed work not counted).
    results["deployment"]["session"] = {
        "dialogues": len(gathered),
        "wall_s": session_wall,
        "dialogues_per_s": len(gathered) / session_wall if gathered and session_wall > 0 else None,
        "prefetch": ahead,
        "batch_size": sizer.size,
        "loader_workers": workers,
    }
    store.write_jsonl_atomic(run_dir / SAMPLES_FILE, ordered)
    store.write_json_atomic(run_dir / RESULTS_FILE, results)
    return results


def build_results(config, model, records, fingerprint, the_prompt_hash, template, num_processes) -> dict:
    """results.json: metrics, breakdowns, provenance and deployment figures."""
    summary = scoring.summarise(
        records,
        modes=config.modes,
        orders=config.orders,
        seed=config.seed,
        n_bootstrap=config.n_bootstrap,
        price_in=config.price_in,
        price_out=config.price_out,
    )
    description = model.describe()
    results = {
        "model": description,
        "label": model_label(config, description),
        "config": config.public(),
        "metrics": summary.pop("metrics"),
        "per_subscale": summary.pop("per_subscale"),
        "per_composite": summary.pop("per_composite"),
        **summary,
        "seed": config.seed,
        "prompt_hash": the_prompt_hash,
        "prompt_template": {"name": template.name, "path": template.path, "sha256": template.sha256},
        "dataset_fingerprint": fingerprint,
        "versions": package_versions(),
        "git_hash": git_hash(),
        "num_processes": num_processes,
        "failed_dialogues": [{"id": r["id"], "error": r["error"]} for r in records if r["status"] != "ok"],
    }
    if "by_order" not in results:
        results["by_order"] = None
        results["position_bias_rate"] = None
    return results


def model_label(config: RunConfig, description: dict) -> str:
    """Display name: the adapter's own label, else its name with the notable settings."""
    label = description.get("label") or config.model
    extras = []
    if config.persona:
        extras.append(f"persona={config.persona}")
    if config.inference != "sequential":
        extras.append(config.inference)
    if config.history != "audio":
        extras.append(f"history={config.history}")
    if config.oracle:
        extras.append("oracle")
    if config.choice_mode != "generate":
        extras.append(config.choice_mode)
    return label + (f" [{', '.join(extras)}]" if extras else "")
