"""`speecheq multibench TASK --data DIR ...`: one utterance task through the runner's adapters, batching, sharding and resume.

Each item becomes one query of the runner's kind (eval_scripts.models.base:
the task's system text, the question, the clip, the answer instructions),
answered in batches by `protocol.ask` (longest first, a failing batch retried
item by item). Choice answers are read with parse_option_set; semi-open
answers are rated by the judge (eval_scripts.multibench.judge). Each process
takes a contiguous slice of the pending items and appends one fsynced JSON
line per finished item to `shards/rank<k>.jsonl`; re-running the command
skips finished items and retries failed ones (a model error fails its item).
Scores come from the metric module (speecheq_metric.multibench).
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import logging
import shlex
from collections import Counter
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

import numpy as np

from eval_scripts import protocol
from eval_scripts import runner
from eval_scripts import store
from eval_scripts.models.base import ChoiceQuery
from eval_scripts.models.base import Clip
from eval_scripts.models.base import Part
from eval_scripts.multibench.tasks import Task
from eval_scripts.multibench.tasks import letter
from eval_scripts.multibench.tasks import load_items
from eval_scripts.multibench.tasks import load_task_prompt
from eval_scripts.multibench.tasks import question_parts
from eval_scripts.multibench.tasks import reference_indices
from eval_scripts.multibench.tasks import task_by_name
from eval_scripts.parsing import parse_judge_score
from eval_scripts.parsing import parse_option_set
from eval_scripts.sharded import run_pending

logger = logging.getLogger(__name__)

RESUMABLE_CHANGES = ("output_dir", "data", "limit", "batch_size", "overwrite")  # the data is identified by its fingerprint


@dataclass
class MultibenchConfig:
    """Every option of an utterance-task run."""

    task: str
    model: str
    output_dir: str
    data: str | None = None  # a data folder; None: the rendered example sets
    model_args: dict = field(default_factory=dict)
    judge: str = "scripted"  # semi-open tasks: scripted, openai or gemini
    judge_args: dict = field(default_factory=dict)
    limit: int | None = None
    seed: int = 0
    batch_size: int = 1
    prompt_file: str | None = None
    judge_prompt_file: str | None = None
    pass_mark: int = 4
    overwrite: bool = False

    def validate(self) -> None:
        task_by_name(self.task)
        if self.batch_size < 1:
            raise ValueError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be >= 1, got {self.limit}")
        if not 1 <= self.pass_mark <= 5:
            raise ValueError(f"--pass-mark must be in 1-5, got {self.pass_mark}")

    def public(self) -> dict:
        out = dataclasses.asdict(self)
        out["model_args"], out["judge_args"] = runner.redact(self.model_args), runner.redact(self.judge_args)
        out.pop("overwrite")
        return out


def data_fingerprint(data_dir: Path, task: Task, items: list[dict]) -> str:
    """SHA-256 of the task file and of every clip's bytes (the same items from another folder are the same run)."""
    digest = hashlib.sha256((data_dir / f"{task.name}.jsonl").read_bytes())
    for item in items:
        digest.update(hashlib.sha256((data_dir / item["audio"]).read_bytes()).digest())
    return digest.hexdigest()


def build_query(task: Task, prompt, item: dict, clip: Clip, seed: int) -> ChoiceQuery:
    """The query of one item: the question, the clip, the answer instructions."""
    before, after = question_parts(task, prompt, item)
    parts = [Part("text", text=before + "\n"), Part("audio", clip=clip), Part("text", text="\n" + after)]
    return ChoiceQuery(uid=f"{task.name}/{item['id']}", system=prompt["system"], parts=parts, options=(clip, clip), seed=seed,
                       meta={"item_id": item["id"]})


def answer_chunk(model, judge, task: Task, prompt, items: list[dict], data_dir: Path, config: MultibenchConfig) -> list[dict]:
    """One record per item of a chunk: the model's answer, how it was read, and (semi-open) the judge's rating."""
    from speecheq_dataset.audio import decode_audio

    records, queries = {}, []
    for item in items:
        base = {"id": item["id"], "task": task.name, "language": item.get("language"), "status": "ok", "error": None}
        try:
            array, rate = decode_audio(data_dir / item["audio"], model.sampling_rate, name=str(data_dir / item["audio"]))
        except Exception as exc:  # a broken clip fails its item, named
            records[item["id"]] = {**base, "status": "failed", "error": f"{item['audio']}: {exc}"}
            continue
        clip = Clip(array, rate, column=item["audio"])
        queries.append(build_query(task, prompt, item, clip, protocol.derive_seed(config.seed, task.name, item["id"])))
        records[item["id"]] = base
    by_id = {item["id"]: item for item in items}
    to_judge = []
    for query, (output, share) in zip(queries, protocol.ask(model, "generate", queries, config.batch_size) if queries else []):
        item = by_id[query.meta["item_id"]]
        record = records[item["id"]]
        record.update(prompt={"system": query.system, "parts": [{"text": p.text} if p.kind == "text" else {"audio": item["audio"]}
                                                                for p in query.parts]},
                      raw=output.text, latency_s=output.latency_s, compute_s=share, input_tokens=output.input_tokens,
                      output_tokens=output.output_tokens, cost_usd=output.cost_usd)
        if output.error:
            record.update(status="failed", error=f"model error on {query.uid}: {output.error}")
            continue
        if task.format == "semi_open":
            record["reference"] = item["reference"]
            answer = (output.text or "").strip()
            if answer:
                to_judge.append((record, {"id": item["id"], "question": question_parts(task, prompt, item)[0], "reference": item["reference"],
                                          "answer": answer}))
            else:  # no words name no emotion: rated lowest without asking the judge
                record.update(judge_score=1, judge_reason="the model gave no answer", judge_status="no_answer", judge_detail=None, judge_raw=None)
        else:
            parsed = parse_option_set(output.text, len(item["options"]), single=task.format == "single_choice")
            record.update(parse_status=parsed.status, parse_detail=parsed.detail or None,
                          prediction=list(parsed.options) if parsed.options is not None else None,
                          reference=reference_indices(task, item),
                          prediction_letters=[letter(k) for k in parsed.options] if parsed.options is not None else None)
    if to_judge:
        seeds = [protocol.derive_seed(config.seed, "judge", task.name, entry["id"]) for _, entry in to_judge]
        for (record, _), reply in zip(to_judge, judge.rate([entry for _, entry in to_judge], seeds)):
            if reply.error:
                record.update(judge_score=None, judge_reason=None, judge_status="error", judge_detail=reply.error, judge_raw=None)
            else:
                parsed = parse_judge_score(reply.text)
                record.update(judge_score=parsed.score, judge_reason=parsed.reason, judge_status=parsed.status,
                              judge_detail=parsed.detail or None, judge_raw=reply.text)
    return [records[item["id"]] for item in items]


def scores(task: Task, records: list[dict], pass_mark: int) -> dict | None:
    """The task's metrics over its answered items (speecheq_metric.multibench)."""
    from speecheq_metric import multi_choice_scores
    from speecheq_metric import semi_open_scores
    from speecheq_metric import single_choice_scores

    done = [r for r in records if r["status"] == "ok"]
    if not done:
        return None
    if task.format == "semi_open":
        out = semi_open_scores([r["judge_score"] for r in done], pass_mark=pass_mark)
        out["judge_errors"] = sum(r["judge_status"] == "error" for r in done)
        return out
    if task.format == "multi_choice":
        return multi_choice_scores([r["prediction"] for r in done], [r["reference"] for r in done])
    return single_choice_scores([r["prediction"][0] if r["prediction"] else None for r in done], [r["reference"][0] for r in done])


def run_task(config: MultibenchConfig, *, model=None, judge=None, progress: bool = True, command: list[str] | None = None) -> dict | None:
    """Run (or resume) one utterance task; results.json's content on the main process, None elsewhere."""
    from eval_scripts.models.base import build_model
    from eval_scripts.multibench.examples import example_data
    from eval_scripts.multibench.judge import build_judge

    config.validate()
    task = task_by_name(config.task)
    data_dir = Path(config.data) if config.data else example_data()
    items = load_items(data_dir, task)
    fingerprint = data_fingerprint(data_dir, task, items)
    items = items[: config.limit] if config.limit else items
    prompt = load_task_prompt(task, config.prompt_file)
    judge_prompt = None
    if task.format == "semi_open":
        built, judge_prompt = build_judge(config.judge, config.judge_prompt_file, **config.judge_args)
        judge = judge or built
    accelerator = runner.make_accelerator()
    is_main = accelerator.is_main_process
    run_dir = Path(config.output_dir)
    public = config.public()
    for key in RESUMABLE_CHANGES:
        public.pop(key, None)
    ident = {"config": public, "data_fingerprint": fingerprint, "prompt_sha256": prompt.sha256,
             "judge_prompt_sha256": judge_prompt.sha256 if judge_prompt else None, "track": f"multibench/{task.name}"}
    runner.prepare_run_dir(run_dir, ident, config.overwrite, is_main)
    accelerator.wait_for_everyone()
    if model is None:
        model = build_model(config.model, **config.model_args)

    ids = [item["id"] for item in items]

    def process(chunk: list[int]) -> list[dict]:
        return answer_chunk(model, judge, task, prompt, [items[k] for k in chunk], data_dir, config)

    done = run_pending(accelerator, run_dir, ids, process, chunk_size=2 * config.batch_size, progress=progress,
                       desc=f"{task.name} {config.model}", unit="item")
    if done is None:
        return None
    ordered = done.records
    description = model.describe()
    languages = sorted({r["language"] for r in ordered if r.get("language")})
    latencies = [r["latency_s"] for r in ordered if r.get("latency_s")]
    results = {
        "track": f"multibench/{task.name}",
        "task": task.name,
        "format": task.format,
        "model": description,
        "label": description.get("label") or config.model,
        "config": config.public(),
        "metrics": scores(task, ordered, config.pass_mark),
        "per_language": {lang: scores(task, [r for r in ordered if r.get("language") == lang], config.pass_mark) for lang in languages},
        "parse_status": dict(Counter(r.get("parse_status") or r.get("judge_status") for r in ordered if r["status"] == "ok")),
        "prompts": {"task": prompt.record(), "judge": judge_prompt.record() if judge_prompt else None},
        "judge": judge.describe() if judge_prompt else None,
        "judge_usage": judge.usage() if judge_prompt else None,
        "data": {"path": str(data_dir), "fingerprint": fingerprint, "n_items": len(ids)},
        "seed": config.seed,
        "versions": runner.package_versions(),
        "git_hash": runner.git_hash(),
        "num_processes": accelerator.num_processes,
        "failed_items": [{"id": r["id"], "error": r["error"]} for r in ordered if r["status"] != "ok"],
        "deployment": {"mean_latency_s": float(np.mean(latencies)) if latencies else None,
                       "session": {"items": done.new, "wall_s": done.wall_s}},
        "timestamp_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": shlex.join(command) if command else None,
    }
    store.write_jsonl_atomic(run_dir / store.SAMPLES_FILE, ordered)
    store.write_json_atomic(run_dir / store.RESULTS_FILE, results)
    return results
