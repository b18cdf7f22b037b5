"""`speecheq generate`: the whole pipeline, resumable, with refills, balanced selection, audit and oracle check.

Work files live in `OUT_DIR/.speecheq-generate/` (hidden, so the raw reader
skips them): plan.json (the items), one JSONL per stage, audio candidates,
the feature cache, and report.json / audit.csv / oracle.csv. A re-run of the
same command skips every finished item. Items rejected at any stage are
replaced (same cell, scenario type and balance targets, new seed) for up to
`refill_rounds` rounds, so each cell reaches its target count.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from collections import Counter
from dataclasses import asdict
from dataclasses import dataclass
from dataclasses import field
from pathlib import Path

from speecheq_dataset.delivery_rules import RULES
from speecheq_dataset.files import write_bytes_atomic
from speecheq_dataset.secrecy import scrub_bytes
from speecheq_dataset.taxonomy import VALENCES

from ..audit import DEFAULT_BOUND
from ..audit import high_larger
from ..audit import audit_markdown
from ..audit import audit_table
from ..audit import passes_bound
from ..audit import write_audit_csv
from ..features import FeatureCache
from .balance import group_balance
from .balance import pair_choices_from_speech
from .balance import select
from .matrix import SCENARIO_TYPES
from .matrix import Item
from .matrix import item_from_dict
from .matrix import plan_items
from .matrix import replacement_for
from .prompts import PROMPT_VERSION
from .speech import SpeechConfig
from .speech import add_counter_renderings
from .speech import run_speech_stage
from .stages import TEXT_STAGES
from .stages import StageStats
from .stages import run_text_stage
from .store import OK
from .store import REJECTED
from .store import StageStore
from .writer import assemble
from .writer import signature
from .writer import write_dialogue

logger = logging.getLogger(__name__)

WORK_DIR_NAME = ".speecheq-generate"
ALL_STAGES = (*TEXT_STAGES, "speech")


@dataclass(frozen=True)
class GenerateConfig:
    """What `speecheq generate` was asked for; a re-run into the same folder must ask the same."""

    out_dir: str
    llm: str = "scripted"
    tts: str = "espeak"
    per_cell: int = 1
    seed: int = 0
    base_url: str | None = None
    llm_model: str | None = None
    tts_model: str | None = None
    subscales: tuple[str, ...] | None = None
    valences: tuple[str, ...] = VALENCES
    scenario_types: tuple[str, ...] = SCENARIO_TYPES
    max_attempts: int = 3
    max_syntheses: int = 4
    refill_rounds: int = 2
    bound: float = DEFAULT_BOUND
    balance_rounds: int = 2  # rounds of counter-steered renderings while a rule exceeds the bound
    oracle: bool = True
    exclusions: str | None = None  # a `speecheq human-check import` file: these dialogues are left out and the rest rebalanced
    llm_concurrency: int = 4
    tts_base_url: str | None = None  # an OpenAI-compatible speech endpoint for --tts openai
    price_in: float | None = None  # USD per 1M input tokens of --llm openai, for the cost tally
    price_out: float | None = None

    def plan_key(self) -> dict:
        """The settings that define the plan (changing them needs a new OUT_DIR)."""
        return {"per_cell": self.per_cell, "seed": self.seed, "subscales": list(self.subscales or []), "valences": list(self.valences),
                "scenario_types": list(self.scenario_types)}


@dataclass
class GenerateSummary:
    out_dir: Path
    stages: list[StageStats] = field(default_factory=list)
    written: int = 0
    unchanged: int = 0
    per_cell: dict = field(default_factory=dict)
    audit_rows: list = field(default_factory=list)
    audit_ok: bool = False
    balance_rounds: int = 0
    bound: float = DEFAULT_BOUND
    oracle: dict | None = None
    usage: dict = field(default_factory=dict)
    rejected: dict[str, list[str]] = field(default_factory=dict)

    def text(self) -> str:
        lines = [f"speecheq generate -> {self.out_dir}"]
        lines += ["  " + s.line() for s in self.stages]
        if self.balance_rounds:
            lines.append(f"  balance rounds with counter-steered renderings: {self.balance_rounds}")
        lines.append(f"  dialogues written {self.written}, unchanged {self.unchanged}; per cell: "
                     f"min {min(self.per_cell.values(), default=0)}, max {max(self.per_cell.values(), default=0)}")
        if self.rejected:
            lines.append(f"  rejected items ({len(self.rejected)}):")
            lines += [f"    {item}: {'; '.join(reasons)[:200]}" for item, reasons in sorted(self.rejected.items())]
        if self.audit_rows:
            lines += ["", audit_markdown(self.audit_rows, title="Shortcut audit of the generated set", bound=self.bound)]
        if self.oracle:
            lines.append(f"\n  oracle text check: accuracy {self.oracle['accuracy']:.3f} over {self.oracle['n_dialogues']} dialogues; "
                         f"flagged {len(self.oracle['flagged'])}: {', '.join(self.oracle['flagged'][:10])}")
        if self.usage:
            lines.append(f"  usage: {json.dumps(self.usage)}")
        return "\n".join(lines)


def work_dir_of(out_dir: Path | str) -> Path:
    return Path(out_dir) / WORK_DIR_NAME


def load_or_create_plan(config: GenerateConfig, work_dir: Path) -> tuple[list[Item], dict[str, str]]:
    """(items, rejected item -> its replacement) of this OUT_DIR: created on the first run, reused after.

    A different plan key (per-cell count, seed, subscales, ...) fails by name rather than mixing two plans.
    """
    path = work_dir / "plan.json"
    if path.is_file():
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved["key"] != config.plan_key():
            raise ValueError(f"{config.out_dir} holds a generation with other settings ({saved['key']}); use a new OUT_DIR")
        return [item_from_dict(d) for d in saved["items"]], dict(saved.get("replacements", {}))
    items = plan_items(config.per_cell, config.seed, scenario_types=config.scenario_types, subscales=config.subscales,
                       valences=config.valences)
    save_plan(config, work_dir, items, {})
    return items, {}


def save_plan(config: GenerateConfig, work_dir: Path, items: list[Item], replacements: dict[str, str]) -> None:
    payload = {"key": config.plan_key(), "items": [i.as_dict() for i in items], "replacements": replacements}
    write_bytes_atomic(work_dir / "plan.json", json.dumps(payload, indent=1).encode())


def rejected_items(work_dir: Path) -> dict[str, list[str]]:
    """item_id -> reasons, for items rejected at any stage."""
    out = {}
    for stage in ALL_STAGES:
        for item_id, record in StageStore(work_dir, stage).load().items():
            if record.get("status") == REJECTED:
                out[item_id] = [f"{stage}: {r}" for r in record.get("reasons", [])]
    return out


def add_replacements(items: list[Item], replacements: dict[str, str], rejected: dict[str, list[str]], seed: int) -> list[Item]:
    """New items for rejected ones not yet replaced (same cell and targets; replicate numbers continue per cell); updates `replacements`."""
    next_replicate: Counter = Counter()
    for item in items:
        next_replicate[item.cell] = max(next_replicate[item.cell], item.replicate + 1)
    fresh = []
    for item in items:
        if item.item_id in rejected and item.item_id not in replacements:
            new = replacement_for(item, next_replicate[item.cell], seed)
            next_replicate[item.cell] += 1
            replacements[item.item_id] = new.item_id
            fresh.append(new)
    return fresh


def run_stages(items: list[Item], work_dir: Path, text_backend, tts, cache: FeatureCache, config: GenerateConfig,
               progress: bool) -> list[StageStats]:
    stats = [run_text_stage(stage, items, work_dir, text_backend, max_attempts=config.max_attempts, progress=progress)
             for stage in TEXT_STAGES]
    stats.append(run_speech_stage(items, work_dir, tts, cache, config=SpeechConfig(max_syntheses=config.max_syntheses), progress=progress))
    return stats


def merge_stats(rounds: list[list[StageStats]]) -> list[StageStats]:
    merged = {}
    for round_stats in rounds:
        for s in round_stats:
            m = merged.setdefault(s.stage, StageStats(s.stage, skipped=s.skipped))
            m.done += s.done
            m.rejected += s.rejected
            m.failed += s.failed
            m.retried += s.retried
    return list(merged.values())


def select_balanced(config: GenerateConfig, items: list[Item], work_dir: Path, tts, cache: FeatureCache, summary: GenerateSummary):
    """(ready items, selection): balanced selection, with counter-steered renderings added while a rule exceeds the bound."""
    excluded: set[str] = set()
    if config.exclusions:
        from ..human_check import load_exclusions

        excluded = set(load_exclusions(config.exclusions))
    for balance_round in range(config.balance_rounds + 1):
        records = {stage: StageStore(work_dir, stage).load() for stage in ALL_STAGES}
        ready = [i for i in items if all(records[s].get(i.item_id, {}).get("status") == OK for s in ALL_STAGES)
                 and i.dataset_id(config.seed) not in excluded]
        pairs = [p for i in ready for p in pair_choices_from_speech(i.item_id, i.group, records["speech"][i.item_id]["output"])]
        selected = select(pairs, seed=config.seed)
        audit_pairs = [audit for _, audit in selected.values()]
        if not audit_pairs or passes_bound(audit_table(audit_pairs), config.bound) or balance_round == config.balance_rounds:
            break
        worst = max(audit_table(audit_pairs), key=lambda r: r.pair_accuracy)
        feature = RULES[worst.rule][0]
        sides = {key: high_larger(audit, feature) for key, (_, audit) in selected.items()}
        added = add_counter_renderings(work_dir, {i.item_id: i for i in ready}, sides, feature, tts, cache, seed=config.seed + balance_round,
                                       config=SpeechConfig(max_syntheses=config.max_syntheses))
        logger.info("balance round %d: %s at %.3f > %.2f; %d counter-steered rendering(s) added", balance_round + 1, worst.rule,
                    worst.pair_accuracy, config.bound, added)
        summary.balance_rounds += 1
        if added == 0:
            break
    return ready, selected, records, excluded


def finalize(config: GenerateConfig, items: list[Item], work_dir: Path, text_backend, tts, cache: FeatureCache, summary: GenerateSummary,
             progress: bool) -> None:
    """Select balanced renderings, write the raw layout, and audit (and oracle-check) what was written."""
    out_dir = Path(config.out_dir)
    ready, selected, records, excluded = select_balanced(config, items, work_dir, tts, cache, summary)
    written_path = work_dir / "written.json"
    written = json.loads(written_path.read_text()) if written_path.is_file() else {}
    for item in items:  # dialogues a human check failed: removed from the output (the rest was rebalanced without them)
        if item.dataset_id(config.seed) in excluded:
            shutil.rmtree(out_dir / item.subscale / item.dataset_id(config.seed), ignore_errors=True)
            written.pop(item.dataset_id(config.seed), None)
    meta_gen = {"llm": config.llm, "llm_model": config.llm_model, "tts": config.tts, "tts_model": config.tts_model,
                "prompt_version": PROMPT_VERSION, "contrast": "contrast_v1", "seed": config.seed}
    kept, metadatas = [], []
    for item in ready:
        if (item.item_id, 4) not in selected or (item.item_id, 6) not in selected:
            continue
        dataset_id = item.dataset_id(config.seed)
        outputs = {s: records[s][item.item_id]["output"] for s in ALL_STAGES}
        metadata, clips = assemble(item, dataset_id, outputs, {t: selected[(item.item_id, t)][0] for t in (4, 6)}, work_dir,
                                   {"time": records["speech"][item.item_id]["time"], "generator": meta_gen})
        sig = signature(metadata, clips)
        folder = out_dir / item.subscale / dataset_id
        if written.get(dataset_id) == sig and folder.is_dir():
            summary.unchanged += 1
        else:
            write_dialogue(out_dir, item.subscale, dataset_id, metadata, clips)
            written[dataset_id] = sig
            summary.written += 1
        kept.append(item)
        metadatas.append(metadata)
    write_bytes_atomic(written_path, json.dumps(written, indent=1).encode())
    summary.per_cell = {f"{s}/{v}": n for (s, v), n in Counter(i.cell for i in kept).items()}
    audit_pairs = [selected[(i.item_id, t)][1] for i in kept for t in (4, 6)]
    if audit_pairs:
        summary.audit_rows = audit_table(audit_pairs)
        summary.audit_ok = passes_bound(summary.audit_rows, config.bound)
        write_audit_csv(summary.audit_rows, work_dir / "audit.csv")
    if config.oracle and metadatas:
        from ..oracle import oracle_summary
        from ..oracle import run_oracle
        from ..oracle import write_oracle_csv

        results = run_oracle(metadatas, text_backend, seed=config.seed, progress=progress)
        write_oracle_csv(results, work_dir / "oracle.csv")
        summary.oracle = oracle_summary(results)
    report = {"config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(config).items()},
              "stages": [asdict(s) for s in summary.stages], "written": summary.written, "unchanged": summary.unchanged,
              "per_cell": summary.per_cell, "rejected": summary.rejected,
              "audit": [asdict(r) for r in summary.audit_rows], "audit_passes_bound": summary.audit_ok,
              "balance_by_group": {"/".join(g): v for g, v in group_balance({k: v for k, v in selected.items()
                                                                               if k[0] in {i.item_id for i in kept}}).items()},
              "oracle": summary.oracle, "usage": summary.usage}
    write_bytes_atomic(work_dir / "report.json", scrub_bytes(json.dumps(report, indent=1, default=_json_default).encode()))


def _json_default(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return str(value)


def refuse_a_foreign_folder(out_dir: Path) -> None:
    """A ValueError when OUT_DIR holds anything but an earlier generate run's work (ours has OUT_DIR/.speecheq-generate)."""
    if not out_dir.is_dir() or work_dir_of(out_dir).is_dir():
        return
    found = sorted(p.name for p in out_dir.iterdir())
    if found:
        shown = ", ".join(found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
        raise ValueError(f"{out_dir} is not empty ({shown}) and is not a folder of an earlier `speecheq generate` run "
                         f"(no {WORK_DIR_NAME}/): generate writes and replaces dialogue folders there, so pick a new or empty folder")


def run_pipeline(config: GenerateConfig, *, text_backend=None, tts=None, progress: bool = True) -> GenerateSummary:
    """Run (or resume) the whole pipeline into config.out_dir and return what it did."""
    from .llm import build_text_backend
    from speecheq_dataset.tts_backends import build_tts

    if config.per_cell < 1:
        raise ValueError(f"--per-cell must be >= 1, got {config.per_cell}")
    work_dir = work_dir_of(config.out_dir)
    refuse_a_foreign_folder(Path(config.out_dir))
    work_dir.mkdir(parents=True, exist_ok=True)
    owned = []  # backends built here are closed here
    if text_backend is None:
        options = {}
        if config.llm == "openai":
            options = {k: v for k, v in {"base_url": config.base_url, "model": config.llm_model, "price_in": config.price_in,
                                         "price_out": config.price_out}.items() if v is not None}
            options["concurrency"] = config.llm_concurrency
        text_backend = build_text_backend(config.llm, **options)
        owned.append(text_backend)
    if tts is None:
        options = {k: v for k, v in {"model": config.tts_model, "base_url": config.tts_base_url}.items() if v}
        tts = build_tts(config.tts, **options)
        owned.append(tts)
    try:
        return _run(config, work_dir, text_backend, tts, progress)
    finally:
        for backend in owned:
            backend.close()


def _run(config: GenerateConfig, work_dir: Path, text_backend, tts, progress: bool) -> GenerateSummary:
    cache = FeatureCache(work_dir / "features.jsonl")
    items, replacements = load_or_create_plan(config, work_dir)
    summary = GenerateSummary(Path(config.out_dir), bound=config.bound)
    rounds = []
    for round_number in range(config.refill_rounds + 1):
        rounds.append(run_stages(items, work_dir, text_backend, tts, cache, config, progress))
        if round_number == config.refill_rounds:
            break
        fresh = add_replacements(items, replacements, rejected_items(work_dir), config.seed)
        if not fresh:
            break
        logger.info("refill round %d: %d replacement item(s) for rejected ones", round_number + 1, len(fresh))
        items = items + fresh
        save_plan(config, work_dir, items, replacements)
    summary.stages = merge_stats(rounds)
    summary.rejected = rejected_items(work_dir)
    finalize(config, items, work_dir, text_backend, tts, cache, summary, progress)
    summary.usage = {"llm": text_backend.usage() if hasattr(text_backend, "usage") else {}, "tts": tts.describe()}
    return summary
