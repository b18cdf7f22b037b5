"""The evaluation runner: dataset -> decoded dialogues -> protocol.run_rounds -> run directory.

The protocol (prompts, both rounds, reading answers) lives in protocol.py; this
module does what surrounds it: sharding with accelerate (each process takes a
contiguous slice of the pending dialogues), resuming (per-rank append-only
JSONL), provenance (config, versions, git hash, fingerprint) and the files of a
run directory. A broken clip fails its dialogue, named; the run goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import json
import logging
import shlex
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from eval_scripts import batching
from eval_scripts import prefetch
from eval_scripts import protocol
from eval_scripts import scoring
from eval_scripts import store
from eval_scripts.records import DialogueRecord
from eval_scripts.models.base import ChoiceModel
from eval_scripts.models.base import Clip
from eval_scripts.models.base import build_model
from eval_scripts.prompts import load_template
from eval_scripts.prompts import persona_text
from eval_scripts.prompts import prompt_hash
from eval_scripts.sharded import RunProgress
from eval_scripts.sharded import answer_pending
from eval_scripts.sharded import standing
from speecheq_dataset.columns import CLIP_COLUMNS
from speecheq_dataset.columns import TEXT_COLUMNS
from speecheq_dataset.columns import TONE_COLUMNS

logger = logging.getLogger(__name__)

SAMPLES_FILE = store.SAMPLES_FILE
RESULTS_FILE = store.RESULTS_FILE
VERSION_PACKAGES = ("speecheq", "torch", "transformers", "accelerate", "datasets", "numpy", "evaluate", "torchcodec")


class DialogueError(RuntimeError):
    """A dialogue that cannot be evaluated (a clip missing or undecodable); the message names it."""


# Marks a RunConfig field whose value never changes an answer: it may change when a run is resumed,
# and two runs that differ only in such fields are the same experiment (the report pairs them).
ANSWER_NEUTRAL = {"answer_neutral": True}


@dataclass
class RunConfig:
    """Every option of a run (the CLI fills it; tests build it directly)."""

    model: str
    output_dir: str = field(metadata=ANSWER_NEUTRAL)
    # The --tasks name of the protocol settings below, if one was used (the settings themselves are what count).
    preset: str | None = field(default=None, metadata=ANSWER_NEUTRAL)
    # The dataset is identified by its content fingerprint, not by the path or Hub id it came from.
    dataset: str | None = field(default=None, metadata=ANSWER_NEUTRAL)
    model_args: dict = field(default_factory=dict)
    limit: int | None = field(default=None, metadata=ANSWER_NEUTRAL)  # a larger limit extends a run
    seed: int = 0
    # An int, or "auto": the largest that fits, found by halving on out-of-memory (eval_scripts/batching.py).
    batch_size: int | str = field(default=1, metadata=ANSWER_NEUTRAL)
    # Chunks of dialogues loaded ahead in a background thread; None: 1 on a GPU, 0 on CPU.
    prefetch: int | None = field(default=None, metadata=ANSWER_NEUTRAL)
    # Processes that decode and prepare clips; None: up to 4 on a GPU, 0 on CPU.
    loader_workers: int | None = field(default=None, metadata=ANSWER_NEUTRAL)
    inference: str = "sequential"
    history: str = "audio"
    orders: str = "random"
    num_runs: int = 1
    persona: str | None = None
    prompt_file: str | None = None
    choice_mode: str = "generate"  # "generate", "logprob" or "both"
    oracle: bool = False
    overwrite: bool = field(default=False, metadata=ANSWER_NEUTRAL)
    price_in: float | None = field(default=None, metadata=ANSWER_NEUTRAL)  # USD per million input tokens
    price_out: float | None = field(default=None, metadata=ANSWER_NEUTRAL)  # USD per million output tokens
    n_bootstrap: int = field(default=1000, metadata=ANSWER_NEUTRAL)

    @classmethod
    def answer_neutral_keys(cls) -> frozenset[str]:
        """The fields that never change an answer (see ANSWER_NEUTRAL)."""
        return frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get("answer_neutral"))

    @property
    def modes(self) -> list[str]:
        return ["generate", "logprob"] if self.choice_mode == "both" else [self.choice_mode]

    def validate(self) -> None:
        """Reject impossible settings with a message naming the option."""
        checks = {
            "inference": (self.inference, protocol.INFERENCES),
            "history": (self.history, protocol.HISTORIES),
            "orders": (self.orders, protocol.ORDERS),
            "choice_mode": (self.choice_mode, protocol.CHOICE_MODES),
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


def setting_deviations(config: dict) -> list[str]:
    """How a run's recorded config departs from the main setting of SPEC §5, as label words; [] for the main setting.

    The main setting: sequential inference, audio history, the default system prompt and template, real clips.
    """
    deviations = []
    if config.get("persona"):
        deviations.append(f"persona={config['persona']}")
    if config.get("inference", "sequential") != "sequential":
        deviations.append(config["inference"])
    if config.get("history", "audio") != "audio":
        deviations.append(f"history={config['history']}")
    if config.get("oracle"):
        deviations.append("oracle")
    if config.get("prompt_file"):
        deviations.append(f"prompt={Path(config['prompt_file']).name}")
    return deviations


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
) -> tuple[list[protocol.Dialogue], list[DialogueRecord]]:
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
            failed.append(DialogueRecord(str(row["id"]), str(row["subscale"]), "failed", str(exc)))
            continue
        if prepare_for is not None:
            model.prepare_clips(protocol.heard_clips(prepare_for, dialogue))
        dialogues.append(dialogue)
    return dialogues, failed


# ---------------------------------------------------------------- the run


def check_model(model: ChoiceModel, config: RunConfig) -> None:
    """Fail early on a model/option combination that cannot work."""
    for mode in config.modes:
        if mode not in model.modes:
            raise ValueError(f"model {config.model!r} has no {mode!r} choice mode (it supports: {', '.join(sorted(model.modes))})")
    if model.needs_text_parts and protocol.plays_audio(config.history, config.oracle):
        raise ValueError(f"model {config.model!r} reads text only: run it with --oracle --history text")


def identity(config: RunConfig, fingerprint: str, the_prompt_hash: str) -> dict:
    """What must match for a run directory to be resumed."""
    public = config.public()
    for key in RunConfig.answer_neutral_keys():
        public.pop(key, None)
    return {"config": public, "dataset_fingerprint": fingerprint, "prompt_hash": the_prompt_hash}


def prepare_run_dir(run_dir: Path, ident: dict, overwrite: bool, is_main: bool, extra_outputs: tuple[str, ...] = ()) -> None:
    """Refuse to resume into a directory of a different run, or to write over outputs no run of ours left there;
    with --overwrite, remove the run's outputs (the usual files plus a track's `extra_outputs` folders) first (rank 0 writes)."""
    config_path = run_dir / store.RUN_CONFIG
    outputs = (store.SHARDS_DIR, SAMPLES_FILE, RESULTS_FILE, *extra_outputs)
    if config_path.is_file() and not overwrite:
        previous = json.loads(config_path.read_text(encoding="utf-8"))
        if previous != ident:
            diffs = _differences(previous, ident)
            raise ValueError(
                f"{run_dir} holds a different run ({'; '.join(diffs)}); use another --output-dir, or --overwrite to start over"
            )
    elif not overwrite:
        # Every run writes run_config.json before anything else, so these files are someone else's.
        present = [name for name in outputs if (run_dir / name).exists()]
        if present:
            raise ValueError(f"{run_dir} already has {', '.join(present)} but no {store.RUN_CONFIG}, so no run of ours wrote them; "
                             "use another --output-dir, or --overwrite to replace them")
    if not is_main:
        return
    if overwrite:
        for name in outputs:
            path = run_dir / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink(missing_ok=True)
        config_path.unlink(missing_ok=True)
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


def load_checked_dataset(config: RunConfig):
    """The dataset of --dataset, or a ValueError in one line naming it (a missing folder, a Hub id that cannot be reached)."""
    try:
        return load_dataset_rows(config)
    except (FileNotFoundError, NotADirectoryError, ValueError) as exc:
        raise ValueError(f"--dataset {config.dataset!r}: {_first_line(exc)}") from exc
    except Exception as exc:  # datasets/huggingface_hub: offline, unreachable, not found, no access
        raise ValueError(f"--dataset {config.dataset!r}: cannot load it ({type(exc).__name__}: {_first_line(exc)})") from exc


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def accelerator_description() -> dict:
    """What ran the model: GPU name, count and CUDA version, or "cpu"."""
    import platform

    import torch

    if torch.cuda.is_available():
        return {"type": "cuda", "name": torch.cuda.get_device_name(0), "count": torch.cuda.device_count(), "cuda": torch.version.cuda}
    return {"type": "cpu", "name": platform.processor() or platform.machine(), "count": 1, "cuda": None}


def warn_if_processes_were_lost(num_processes: int) -> None:
    """`accelerate launch --num_processes N` on CPU without --multi_gpu starts one process: say so, loudly."""
    import os

    launched_by_accelerate = "ACCELERATE_USE_CPU" in os.environ or "ACCELERATE_MIXED_PRECISION" in os.environ
    asked_for_more = "MASTER_ADDR" in os.environ and int(os.environ.get("WORLD_SIZE", "1")) <= 1
    if launched_by_accelerate and asked_for_more and num_processes == 1:
        logger.warning("the launcher asked for several processes but started one (on CPU, `accelerate launch` needs "
                       "--multi_gpu with --num_processes N); this run uses a single process")


def run(config: RunConfig, *, model: ChoiceModel | None = None, dataset=None, progress: bool = True,
        command: list[str] | None = None) -> dict | None:
    """Run (or resume) an evaluation; returns results.json's content on the main process, None elsewhere.

    Everything a user can get wrong (options, the dataset, the prompt) is checked before
    the model is built. `model` and `dataset` may be given ready-made (tests, the demo);
    else they come from the config. `command` is the command line recorded in results.json.
    """
    from speecheq_dataset.loading import dataset_fingerprint

    config.validate()
    template = load_template(config.prompt_file)
    system = persona_text(config.persona) if config.persona else template["system"]
    the_prompt_hash = prompt_hash(template, system)
    if dataset is None:
        dataset = load_checked_dataset(config)
    accelerator = make_accelerator()
    is_main = accelerator.is_main_process
    warn_if_processes_were_lost(accelerator.num_processes)
    run_dir = Path(config.output_dir)
    # The whole dataset's fingerprint, taken before --limit: a run extended to more dialogues is the same run.
    fingerprint = dataset_fingerprint(dataset)
    dataset = first_rows(dataset, config.limit)
    ident = identity(config, fingerprint, the_prompt_hash)
    prepare_run_dir(run_dir, ident, config.overwrite, is_main)
    accelerator.wait_for_everyone()
    if model is None:
        model = build_model(config.model, **config.model_args)
    check_model(model, config)

    ids = [str(i) for i in dataset["id"]]
    previous: dict[str, DialogueRecord] = store.latest_records(store.read_shards(run_dir), ids)
    done = {i for i, r in previous.items() if r.ok}
    pending = [k for k, i in enumerate(ids) if i not in done]
    if is_main and not pending:
        print(f"{run_dir}: all {len(ids)} dialogues already done; writing the results again", flush=True)
    elif is_main and done:
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
    session_began = time.perf_counter()
    ahead = loading_depth(config, accelerator.device)
    workers = prefetch.worker_count(config.loader_workers, accelerator.device)
    # Rank 0 draws the bar for the whole run: it counts every rank's shard lines, not only its own share.
    bar = RunProgress(run_dir, total=len(pending), enabled=is_main and progress and bool(pending),
                      desc=f"{config.model} ({accelerator.num_processes} process{'es' if accelerator.num_processes > 1 else ''})")

    def answer_chunks(chunks: list[list[int]]):
        loaded = prefetch.load_ahead(chunks, load_dialogues, dataset, model, settings, depth=ahead, workers=workers)
        with contextlib.closing(loaded):
            for dialogues, failed in loaded:
                records = protocol.run_rounds(model, settings, dialogues, trajectories, batch_size=sizer) if dialogues else []
                yield {r.id: r for r in records + failed}

    gathered = answer_pending(accelerator, run_dir, ids, pending, chunk_size, answer_chunks, bar.refresh)
    bar.close()
    ordered, new = standing(previous, gathered, ids), len(gathered)
    session_wall = time.perf_counter() - session_began
    if not is_main:
        return None
    results = build_results(config, model, ordered, fingerprint, the_prompt_hash, template, accelerator.num_processes)
    results["timestamp_utc"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    results["accelerator"] = accelerator_description()
    results["command"] = shlex.join(command) if command else None
    # This invocation's throughput over all processes (start-up excluded; resumed work not counted).
    results["deployment"]["session"] = {
        "dialogues": new,
        "wall_s": session_wall,
        "dialogues_per_s": new / session_wall if new and session_wall > 0 else None,
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
        "failed_dialogues": [{"id": r.id, "error": r.error} for r in records if not r.ok],
    }
    if "by_order" not in results:
        results["by_order"] = None
        results["position_bias_rate"] = None
    return results


def model_label(config: RunConfig, description: dict) -> str:
    """Display name: the adapter's own label, else its name, with the settings that depart from the main one."""
    label = description.get("label") or config.model
    extras = setting_deviations(config.public())
    if config.choice_mode != "generate":
        extras.append(config.choice_mode)
    return label + (f" [{', '.join(extras)}]" if extras else "")
