"""The generative track (EMO-Reasoning, SPEC §7): a speech-output model answers the catalyst; its replies are scored with ERS.

For each dialogue the model hears the catalyst's turns 1, 3 and 5 (audio) and
answers each out loud, with its own earlier replies in the conversation. Its
reply to catalyst turn k takes the dialogue's turn k + 1 (2, 4, 6). Written:
- `DIR/replies/<id>/<turn>.wav` — the spoken reply (16-bit PCM at the model's rate);
- `DIR/trajectories/<id>/<turn>_user.csv`, `<turn>_model.csv` — per-second
  valence/arousal/dominance of the catalyst's turn before it and of the reply
  (named columns, the SPEC §7 CSV layout);
- `DIR/samples.jsonl` — one record per dialogue: per turn the reply's words,
  file paths, durations, tokens, latency (and emotion labels when a classifier is configured);
- `DIR/results.json` — ECS/EBS/ESS/ERS (turn means) and CT-ECS/CT-EBS/CT-ESS/CT-ERS
  (dialogue means) in both variants of the metric module, overall, per scenario
  valence and per subscale, computed from the trajectory files; plus the
  categorical ERS when an emotion classifier is configured.

Sharded and resumable exactly like the forced-choice runner (its accelerate
set-up, run-directory identity check and append-only rank shards): each
process answers a contiguous slice of the pending dialogues, a finished
dialogue is one fsynced line, re-running the command skips finished ones.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from eval_scripts import protocol
from eval_scripts import runner
from eval_scripts import store
from eval_scripts.sharded import run_pending
from eval_scripts.models.tiny import TINY
from eval_scripts.prompts import PROMPTS_DIR
from speecheq_dataset.columns import audio_column

logger = logging.getLogger(__name__)

REPLIES_DIR = "replies"
TRAJECTORIES_DIR = "trajectories"
USER_TURNS = (1, 3, 5)  # the catalyst's turns; the reply to turn k is turn k + 1
DEFAULT_PROMPT = PROMPTS_DIR / "respond" / "respond_v1.json"
RESUMABLE_CHANGES = ("batch_size", "limit", "overwrite", "output_dir", "dataset")
DTW_BACKENDS = ("exact", "fastdtw")
ERS_VARIANTS = ("reference", "paper")
VAD_RATE = 16_000


@dataclass
class RespondConfig:
    """Every option of a generative run (the CLI fills it; tests build it directly)."""

    model: str
    output_dir: str
    dataset: str | None = None
    model_args: dict = field(default_factory=dict)
    vad: str = "windows"  # frame-level V/A/D extractor: windows (audeering on 1-s windows) or cser
    vad_args: dict = field(default_factory=dict)
    emotion_classifier: str | None = None  # audio classifier for the categorical ERS (Hub id, folder or tiny-random)
    limit: int | None = None
    seed: int = 0
    batch_size: int = 1  # dialogues answered together (one request per dialogue per catalyst turn)
    dtw: str = "exact"
    prompt_file: str | None = None
    overwrite: bool = False

    def validate(self) -> None:
        from eval_scripts.components.vad import EXTRACTORS

        if self.batch_size < 1:
            raise ValueError(f"--batch-size must be >= 1, got {self.batch_size}")
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"--limit must be >= 1, got {self.limit}")
        if self.dtw not in DTW_BACKENDS:
            raise ValueError(f"--dtw must be one of {', '.join(DTW_BACKENDS)}; got {self.dtw!r}")
        if self.vad not in EXTRACTORS:
            raise ValueError(f"--vad must be one of {', '.join(sorted(EXTRACTORS))}; got {self.vad!r}")

    def resolved_vad_args(self) -> dict:
        """The extractor's args; a tiny-random responder gets a tiny-random extractor unless one is named (fully offline)."""
        args = dict(self.vad_args)
        if self.model_args.get("pretrained") == TINY and "pretrained" not in args:
            args["pretrained"] = TINY
        args.setdefault("seed", self.seed)
        return args

    def public(self) -> dict:
        """The config as recorded in results.json (secret-looking model args redacted)."""
        out = dataclasses.asdict(self)
        out["model_args"] = runner.redact(self.model_args)
        out["vad_args"] = self.resolved_vad_args()
        out.pop("overwrite")
        return out


@dataclass(frozen=True)
class RespondTemplate:
    """The scene instructions with placeholders, and the SHA-256 of the file's bytes."""

    path: str
    name: str
    instructions: str
    sha256: str


def load_respond_template(path: str | Path | None = None) -> RespondTemplate:
    """Read a respond template JSON (key `instructions`); errors name the file."""
    path = Path(path) if path else DEFAULT_PROMPT
    try:
        raw = path.read_bytes()
        data = json.loads(raw)
    except (OSError, ValueError) as exc:
        raise ValueError(f"prompt file {path}: cannot read a JSON object ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get("instructions"), str):
        raise ValueError(f"prompt file {path}: needs a text key 'instructions'")
    return RespondTemplate(str(path), str(data.get("name") or path.stem), data["instructions"], hashlib.sha256(raw).hexdigest())


def instructions_for(template: RespondTemplate, dialogue: protocol.Dialogue) -> str:
    """The template filled with the dialogue's scene fields (an unknown placeholder is an error naming it)."""
    values = {name: "" if dialogue.fields.get(name) is None else str(dialogue.fields[name]) for name in protocol.SCENE_FIELDS}
    try:
        return template.instructions.format(**values)
    except KeyError as exc:
        raise ValueError(f"prompt file {template.path}: unknown placeholder {exc}") from None


def reply_path(dialogue_id: str, turn: int) -> str:
    """Path of a reply inside the run directory."""
    return f"{REPLIES_DIR}/{_safe(dialogue_id)}/{turn}.wav"


def trajectory_path(dialogue_id: str, turn: int, who: str) -> str:
    """Path of a trajectory CSV inside the run directory (`who` is user or model)."""
    return f"{TRAJECTORIES_DIR}/{_safe(dialogue_id)}/{turn}_{who}.csv"


def _safe(dialogue_id: str) -> str:
    if not dialogue_id or dialogue_id in (".", "..") or any(c in dialogue_id for c in "/\\\x00"):
        raise ValueError(f"dialogue id {dialogue_id!r} cannot name a folder")
    return dialogue_id


# ---------------------------------------------------------------- answering


def respond_in_order(model, requests: list) -> list:
    """The model's replies in request order; a failing batch is retried request by request, a failing request gets its error."""
    from eval_scripts.responders import SpokenReply

    try:
        replies = model.respond(requests)
        if len(replies) != len(requests):
            raise RuntimeError(f"responder {model.name!r} returned {len(replies)} replies for {len(requests)} requests")
        return replies
    except Exception:
        logger.exception("responder %s failed on a batch of %d; retrying one request at a time", model.name, len(requests))
    replies = []
    for request in requests:
        try:
            replies += model.respond([request])
        except Exception as exc:
            replies.append(SpokenReply(error=f"{type(exc).__name__}: {exc}"))
    return replies


def _at_vad_rate(array: np.ndarray, rate: int) -> np.ndarray:
    from speecheq_dataset.audio import resample

    return resample(array, rate, VAD_RATE)


def answer_chunk(model, vad, labeller, template: RespondTemplate, dialogues: list[protocol.Dialogue], seed: int, run_dir: Path) -> list[dict]:
    """All three replies of each dialogue of a chunk, their files and trajectories; one record per dialogue."""
    from eval_scripts.responders import Exchange
    from eval_scripts.responders import ReplyRequest
    from speecheq_dataset.audio import encode_wav

    conversations: dict[str, list] = {d.id: [] for d in dialogues}
    turns: dict[str, list[dict]] = {d.id: [] for d in dialogues}
    replies_audio: dict[tuple[str, int], tuple[np.ndarray, int]] = {}
    errors: dict[str, str] = {}
    for user_turn in USER_TURNS:
        live = [d for d in dialogues if d.id not in errors]
        if not live:
            break
        requests = []
        for d in live:
            clip = d.clips[audio_column(user_turn)]
            conversations[d.id].append(Exchange("user", text=clip.text, audio=clip.array, sampling_rate=clip.sampling_rate))
            requests.append(ReplyRequest(uid=f"{d.id}/turn{user_turn + 1}", instructions=instructions_for(template, d),
                                         conversation=list(conversations[d.id]), seed=protocol.derive_seed(seed, "respond", d.id, user_turn + 1),
                                         meta={"dialogue_id": d.id, "turn": user_turn + 1}))
        began = time.perf_counter()
        replies = respond_in_order(model, requests)
        share = (time.perf_counter() - began) / len(requests)
        for d, request, reply in zip(live, requests, replies):
            turn = user_turn + 1
            if reply.error or reply.audio is None or reply.audio.size == 0:
                errors[d.id] = f"model error on {request.uid}: {reply.error or 'no audio in the reply'}"
                continue
            path = reply_path(d.id, turn)
            store.write_bytes_atomic(run_dir / path, encode_wav(reply.audio, reply.sampling_rate))
            replies_audio[(d.id, turn)] = (reply.audio, reply.sampling_rate)
            conversations[d.id].append(Exchange("assistant", text=reply.text or "", audio=reply.audio, sampling_rate=reply.sampling_rate))
            turns[d.id].append({
                "turn": turn, "user_turn": user_turn, "user_column": audio_column(user_turn), "user_text": d.clips[audio_column(user_turn)].text,
                "reply_text": reply.text, "reply_wav": path, "reply_duration_s": len(reply.audio) / reply.sampling_rate,
                "reply_sampling_rate": reply.sampling_rate, "input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
                "latency_s": reply.latency_s or share, "cost_usd": reply.cost_usd,
            })
    # Trajectories (and labels) of every finished dialogue of the chunk, in one extractor call.
    finished = [d for d in dialogues if d.id not in errors]
    clips, owners = [], []
    for d in finished:
        for entry in turns[d.id]:
            user = d.clips[entry["user_column"]]
            clips += [_at_vad_rate(user.array, user.sampling_rate), _at_vad_rate(*replies_audio[(d.id, entry["turn"])])]
            owners.append((d.id, entry))
    if clips:
        tracks = vad.trajectories(clips)
        labels = labeller.labels(clips) if labeller is not None else [None] * len(clips)
        for k, (dialogue_id, entry) in enumerate(owners):
            for who, track, label in (("user", tracks[2 * k], labels[2 * k]), ("model", tracks[2 * k + 1], labels[2 * k + 1])):
                path = trajectory_path(dialogue_id, entry["turn"], who)
                store.write_bytes_atomic(run_dir / path, track.to_csv_text().encode("utf-8"))
                entry[f"{who}_csv"] = path
                entry[f"{who}_seconds"] = len(track)
                entry[f"{who}_label"] = label
    records = []
    for d in dialogues:
        record = {"id": d.id, "subscale": d.subscale, "status": "ok", "error": None, "turns": turns[d.id]}
        if d.id in errors:
            record.update(status="failed", error=errors[d.id])
        records.append(record)
    return records


# ---------------------------------------------------------------- scoring


def _dialogue_groups(records: list[dict]) -> dict[str, dict[str, list[int]]]:
    """Indices of the scored dialogues overall, per valence and per subscale."""
    groups: dict[str, dict[str, list[int]]] = {"overall": {"all": list(range(len(records)))}, "per_valence": {}, "per_subscale": {}}
    for k, record in enumerate(records):
        groups["per_valence"].setdefault(record.get("valence") or "unknown", []).append(k)
        groups["per_subscale"].setdefault(record["subscale"], []).append(k)
    return groups


def _summary(dialogue_scores: list) -> dict:
    """Turn means (ECS, ESS, ERS; EBS over active turns) and dialogue means (CT-*; CT-EBS over dialogues with an active turn)."""
    from speecheq_metric import ers_summary

    turns = [t for d in dialogue_scores for t in d.turns]
    out = ers_summary(turns)
    active = [d.ct_ebs for d in dialogue_scores if d.ct_ebs_active]
    out.update(
        ct_ecs=float(np.mean([d.ct_ecs for d in dialogue_scores])),
        ct_ebs=float(np.mean(active)) if active else None,
        ct_ess=float(np.mean([d.ct_ess for d in dialogue_scores])),
        ct_ers=float(np.mean([d.ct_ers for d in dialogue_scores])),
        n_dialogues=len(dialogue_scores),
    )
    return out


def score_run(run_dir: Path, records: list[dict], *, dtw: str = "exact") -> dict:
    """ERS of every finished dialogue from its trajectory files, in both variants, grouped; categorical ERS when labelled."""
    from speecheq_metric import categorical_ers
    from speecheq_metric import ers_dialogues

    scored = [r for r in records if r["status"] == "ok" and r["turns"]]
    if not scored:
        return {"ers": None, "categorical_ers": None}
    pairs = [([str(run_dir / t["user_csv"]) for t in r["turns"]], [str(run_dir / t["model_csv"]) for t in r["turns"]]) for r in scored]
    groups = _dialogue_groups(scored)
    ers = {}
    for variant in ERS_VARIANTS:
        # The paper variant normalises over everything scored together: one call, then grouped means.
        scores = ers_dialogues(pairs, variant=variant, dtw=dtw)
        ers[variant] = {kind: {name: _summary([scores[k] for k in idx]) for name, idx in named.items()} for kind, named in groups.items()}
        ers[variant]["overall"] = ers[variant]["overall"]["all"]
    categorical = None
    if all(t.get("user_label") and t.get("model_label") for r in scored for t in r["turns"]):

        def cat(idx: list[int]) -> float:
            turns = [t for k in idx for t in scored[k]["turns"]]
            return categorical_ers([t["user_label"] for t in turns], [t["model_label"] for t in turns])

        categorical = {kind: {name: cat(idx) for name, idx in named.items()} for kind, named in groups.items()}
        categorical["overall"] = categorical["overall"]["all"]
    return {"ers": ers, "categorical_ers": categorical}


# ---------------------------------------------------------------- the run


def identity(config: RespondConfig, fingerprint: str, template: RespondTemplate) -> dict:
    """What must match for a run directory to be resumed."""
    public = config.public()
    for key in RESUMABLE_CHANGES:
        public.pop(key, None)
    return {"config": public, "dataset_fingerprint": fingerprint, "prompt_sha256": template.sha256, "track": "respond"}


def respond(config: RespondConfig, *, model=None, dataset=None, vad=None, labeller=None, progress: bool = True) -> dict | None:
    """Run (or resume) the generative track; returns results.json's content on the main process, None elsewhere.

    `model`, `dataset`, `vad` and `labeller` may be given ready-made (tests); else they come from the config.
    """
    from eval_scripts.components.vad import build_vad_extractor
    from eval_scripts.responders import build_responder
    from speecheq_dataset.loading import dataset_fingerprint

    config.validate()
    accelerator = runner.make_accelerator()
    is_main = accelerator.is_main_process
    run_dir = Path(config.output_dir)
    template = load_respond_template(config.prompt_file)
    # The data and the run folder are checked before any weights load, so a mistake there costs seconds.
    if dataset is None:
        dataset = runner.load_checked_dataset(config)
    # As in the runner: the whole dataset's fingerprint, before --limit, so a larger limit extends a run.
    fingerprint = dataset_fingerprint(dataset)
    dataset = runner.first_rows(dataset, config.limit)
    runner.prepare_run_dir(run_dir, identity(config, fingerprint, template), config.overwrite, is_main, (REPLIES_DIR, TRAJECTORIES_DIR))
    if model is None:
        model = build_responder(config.model, **config.model_args)
    if vad is None:
        vad = build_vad_extractor(config.vad, **config.resolved_vad_args())
    if labeller is None and config.emotion_classifier:
        from eval_scripts.components.emotion_labels import EmotionLabeller

        labeller = EmotionLabeller(config.emotion_classifier, seed=config.seed)
    accelerator.wait_for_everyone()

    ids = [str(i) for i in dataset["id"]]
    # The scenario valence (v2 data; None in v1) groups the scores; the runner's dialogues do not carry it.
    valences = dict(zip(ids, dataset["scenario_valence"])) if "scenario_valence" in dataset.column_names else {}

    def process(chunk: list[int]) -> list[dict]:
        dialogues, failed = runner.load_dialogues(dataset, chunk, model)
        records = answer_chunk(model, vad, labeller, template, dialogues, config.seed, run_dir) if dialogues else []
        failed = [{"id": r.id, "subscale": r.subscale, "status": "failed", "error": r.error, "turns": []} for r in failed]
        by_id = {r["id"]: {**r, "valence": valences.get(r["id"]) or None} for r in records + failed}
        return [by_id[ids[k]] for k in chunk]

    done = run_pending(accelerator, run_dir, ids, process, chunk_size=config.batch_size, progress=progress, desc=f"respond {config.model}")
    if done is None:
        return None
    ordered = done.records
    for record in ordered:  # failed-at-load records carry no turns
        record.setdefault("turns", [])
    results = build_results(config, model, vad, labeller, ordered, run_dir, fingerprint, template, accelerator.num_processes)
    results["deployment"]["session"] = {"dialogues": done.new, "wall_s": done.wall_s}
    store.write_jsonl_atomic(run_dir / store.SAMPLES_FILE, ordered)
    store.write_json_atomic(run_dir / runner.RESULTS_FILE, results)
    return results


def build_results(config, model, vad, labeller, records, run_dir, fingerprint, template, num_processes) -> dict:
    """results.json of a generative run: scores, provenance and deployment figures."""
    scores = score_run(run_dir, records, dtw=config.dtw)
    turns = [t for r in records if r["status"] == "ok" for t in r["turns"]]
    description = model.describe()
    latencies = [t["latency_s"] for t in turns if t.get("latency_s")]
    costs = [t["cost_usd"] for t in turns if t.get("cost_usd") is not None]
    return {
        "track": "respond",
        "model": description,
        "label": description.get("label") or config.model,
        "config": config.public(),
        "metrics": scores["ers"]["reference"]["overall"] if scores["ers"] else None,
        "ers": scores["ers"],
        "categorical_ers": scores["categorical_ers"],
        "vad_extractor": vad.describe(),
        "emotion_classifier": labeller.describe() if labeller is not None else None,
        "n_dialogues": len(records),
        "n_scored": sum(1 for r in records if r["status"] == "ok"),
        "prompt_template": {"name": template.name, "path": template.path, "sha256": template.sha256},
        "dataset_fingerprint": fingerprint,
        "seed": config.seed,
        "versions": runner.package_versions(),
        "git_hash": runner.git_hash(),
        "num_processes": num_processes,
        "deployment": {
            "replies": len(turns),
            "mean_latency_s": float(np.mean(latencies)) if latencies else None,
            "mean_reply_s": float(np.mean([t["reply_duration_s"] for t in turns])) if turns else None,
            "cost_per_100_replies": 100 * float(np.mean(costs)) if costs else None,
        },
        "failed_dialogues": [{"id": r["id"], "error": r["error"]} for r in records if r["status"] != "ok"],
    }
