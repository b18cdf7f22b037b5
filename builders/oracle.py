"""The oracle text check (SPEC §4): transcripts plus tone instructions -> a text LLM's forced choice.

Without audio, a model that reads the delivery *instructions* should pick the
resonant option almost always; a dialogue it gets wrong is flagged (its
scenario or its tones are ambiguous). Option order is randomised per dialogue
and turn from the seed, so position never carries the answer.
"""

from __future__ import annotations

import json
import logging
import random
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from speecheq_dataset.http_api import map_in_order

from .generation.checks import check_oracle
from .generation.checks import parse_json_object
from .generation.llm import TextRequest
from .generation.matrix import stable_seed
from .generation.prompts import load_prompt
from .tables import write_csv

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OracleResult:
    dataset_id: str
    subscale: str
    correct: dict[int, bool | None]  # turn -> right / wrong / None (no valid answer)
    error: str | None = None

    @property
    def flagged(self) -> bool:
        return self.error is not None or not all(self.correct.values())


def oracle_request(metadata: dict, seed: int) -> tuple[TextRequest, dict[int, int]]:
    """The oracle's request for one dialogue's raw metadata, and the option number of the resonant clip per test turn."""
    scenario = metadata["scenario"]
    lines = {t["sentence_number"]: t["text"] for t in metadata["conversation"]}
    tones = {(e["sentence_number"], e.get("eq_level", "high")): e.get("tone_description") or "" for e in metadata["audio_files"]}
    dataset_id = metadata["generation_metadata"]["dataset_id"]
    rng = random.Random(stable_seed("oracle", seed, dataset_id))
    resonant_at, options = {}, {}
    for turn in (4, 6):
        pair = [tones[(turn, "high")], tones[(turn, "low")]]
        resonant_at[turn] = 1
        if rng.random() < 0.5:
            pair.reverse()
            resonant_at[turn] = 2
        options[turn] = pair
    history = "\n".join(f"Turn {n} ({scenario.get('speaker1_name') if n % 2 else scenario.get('speaker2_name')}): \"{lines[n]}\""
                        for n in (1, 2, 3))
    values = {"context": scenario.get("context", ""), "description": scenario.get("description", ""), "history": history,
              "speaker1_name": scenario.get("speaker1_name", "speaker 1"), "speaker2_name": scenario.get("speaker2_name", "speaker 2"),
              "line4": lines[4], "line5": lines[5], "line6": lines[6], "option4_1": options[4][0], "option4_2": options[4][1],
              "option6_1": options[6][0], "option6_2": options[6][1]}
    inputs = {"valence": scenario.get("scenario_valence") or "", "options": {str(t): options[t] for t in (4, 6)}}
    request = TextRequest("oracle", load_prompt("oracle").render(**values), inputs, stable_seed("oracle-call", seed, dataset_id), 1,
                          label=f"oracle {dataset_id}")
    return request, resonant_at


def run_oracle(metadatas: list[dict], backend, *, seed: int = 0, max_attempts: int = 2, progress: bool = True) -> list[OracleResult]:
    """The oracle check of each dialogue (raw metadata dicts), in order."""

    def one(metadata: dict) -> OracleResult:
        request, resonant_at = oracle_request(metadata, seed)
        dataset_id = metadata["generation_metadata"]["dataset_id"]
        subscale = metadata["generation_metadata"].get("subscale_slug", "")
        problem = "no answer"
        for attempt in range(1, max_attempts + 1):
            reply = backend.complete(TextRequest(request.stage, request.messages, request.inputs, request.seed, attempt, request.label))
            if not reply.ok:
                return OracleResult(dataset_id, subscale, {4: None, 6: None}, reply.error)
            answer, problem = parse_json_object(reply.text)
            reasons = [problem] if answer is None else check_oracle(answer)
            if not reasons:
                return OracleResult(dataset_id, subscale, {t: answer[f"turn{t}"] == f"Option {resonant_at[t]}" for t in (4, 6)})
            problem = "; ".join(reasons)
        return OracleResult(dataset_id, subscale, {4: None, 6: None}, problem)

    return map_in_order(one, metadatas, getattr(backend, "concurrency", 1), progress="oracle  " if progress else None)


def oracle_summary(results: list[OracleResult]) -> dict:
    """Accuracy over all decisions and per subscale, and the flagged dialogues."""
    by_subscale: dict[str, list[bool]] = defaultdict(list)
    for r in results:
        by_subscale[r.subscale] += [bool(v) for v in r.correct.values()]
    decisions = [bool(v) for r in results for v in r.correct.values()]
    return {
        "accuracy": sum(decisions) / len(decisions) if decisions else float("nan"),
        "per_subscale": {s: sum(v) / len(v) for s, v in sorted(by_subscale.items())},
        "flagged": [r.dataset_id for r in results if r.flagged],
        "n_dialogues": len(results),
    }


ORACLE_COLUMNS = ["dataset_id", "subscale", "turn4_correct", "turn6_correct", "flagged", "error"]


def write_oracle_csv(results: list[OracleResult], path: Path | str) -> None:
    write_csv(path, ORACLE_COLUMNS,
              ([r.dataset_id, r.subscale, r.correct[4], r.correct[6], r.flagged, r.error or ""] for r in results))


def load_metadatas(raw_dir: Path | str) -> list[dict]:
    """metadata.json of every dialogue folder of a raw layout (sorted by folder)."""
    from speecheq_dataset.raw import METADATA_FILE
    from speecheq_dataset.raw import find_dialogue_folders

    out = []
    for folder in find_dialogue_folders(raw_dir):
        path = folder / METADATA_FILE
        try:
            metadata = json.loads(path.read_text(encoding="utf-8"))
            metadata["generation_metadata"].setdefault("subscale_slug", folder.parent.name)
            out.append(metadata)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            logger.warning("oracle: skipped %s (%s)", folder, exc)
    return out
