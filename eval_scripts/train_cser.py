"""Train the continuous SER (CSER, SPEC §7) on any per-second-labelled corpus: `accelerate launch eval_scripts/train_cser.py ...`.

Corpus layout: one table, CSV or parquet, one row per (clip, second):

| column | meaning |
|---|---|
| `audio` | the clip's audio file (any format FFmpeg decodes), relative to the table's folder or absolute |
| `second` | 0-based second of the clip the row labels (second k covers [k, k + 1) s) |
| `valence`, `arousal`, `dominance` | the labels of that second (MSP-Conversation style: averaged per second, scaled to [0, 1]) |
| `split` | optional: `train` or `valid` (rows without it train) |

Seconds a clip has but the table does not label are left out of the loss;
rows for seconds beyond the clip's end are dropped (counted in the log).
Columns are read by name, in any order.

The encoder (WavLM-Large by default) is frozen, as in the paper: its per-second
features are computed once per clip and kept in memory; the BiLSTM and the
output layer are trained with the concordance-correlation loss (1 - mean CCC of
the three dimensions over every labelled second of a batch), AdamW. The model
is saved with `save_pretrained` (with the feature extractor) to OUTPUT_DIR,
ready for `speecheq respond --vad cser --vad-args pretrained=OUTPUT_DIR`, and
OUTPUT_DIR/training_log.json records the settings, the loss of every step and
the per-dimension CCC on the `valid` split.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from dataclasses import dataclass
from pathlib import Path

if sys.path and sys.path[0] and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path.pop(0)
try:
    import eval_scripts  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from speecheq_dataset.files import USER_MISTAKES  # noqa: E402
from speecheq_dataset.files import one_line  # noqa: E402

logger = logging.getLogger("eval_scripts.train_cser")

LABEL_COLUMNS = ("valence", "arousal", "dominance")
REQUIRED_COLUMNS = ("audio", "second", *LABEL_COLUMNS)
LOG_FILE = "training_log.json"


@dataclass
class CorpusClip:
    """One clip of the corpus: its audio file and its per-second labels by name (NaN where unlabelled)."""

    audio: Path
    split: str
    labels: dict[int, dict[str, float]]  # second -> {valence, arousal, dominance}


def read_corpus(table: str | Path) -> list[CorpusClip]:
    """The clips of a CSV/parquet table in the documented layout; ValueError names the file and the problem."""
    import pandas as pd

    table = Path(table)
    if not table.is_file():
        raise ValueError(f"{table}: no such corpus table")
    frame = pd.read_parquet(table) if table.suffix == ".parquet" else pd.read_csv(table)
    columns = {str(c).strip().lower(): c for c in frame.columns}
    missing = [c for c in REQUIRED_COLUMNS if c not in columns]
    if missing:
        raise ValueError(f"{table}: missing column(s) {missing}; found {list(frame.columns)}")
    clips: dict[str, CorpusClip] = {}
    for row_no, row in enumerate(frame.to_dict("records"), start=2):
        try:
            second = int(row[columns["second"]])
            values = {d: float(row[columns[d]]) for d in LABEL_COLUMNS}
        except (TypeError, ValueError):
            raise ValueError(f"{table}: row {row_no} has a non-numeric second or label") from None
        if second < 0 or not all(math.isfinite(v) for v in values.values()):
            raise ValueError(f"{table}: row {row_no}: second {second} / labels {values} are not valid")
        name = str(row[columns["audio"]])
        path = Path(name) if Path(name).is_absolute() else table.parent / name
        split = str(row[columns["split"]]).strip().lower() if "split" in columns and isinstance(row[columns["split"]], str) else "train"
        clip = clips.setdefault(name, CorpusClip(path, split, {}))
        clip.labels[second] = values
    for clip in clips.values():
        if not clip.audio.is_file():
            raise ValueError(f"{table}: audio file {clip.audio} does not exist")
    return list(clips.values())


def build_model(init: str, *, encoder: str | None, lstm_hidden_size: int | None, seed: int):
    """(model, feature extractor): `tiny-random`, a saved CSER folder, or a new head on `encoder` (BiLSTM width default 512)."""
    from transformers import AutoFeatureExtractor

    from eval_scripts.components.cser import CSERModel
    from eval_scripts.models.tiny import TINY

    if init == TINY:
        from eval_scripts.components.tiny import build_tiny_cser

        tiny = build_tiny_cser(seed=seed, **({"lstm_hidden_size": lstm_hidden_size} if lstm_hidden_size else {}))
        return tiny.model, tiny.processor
    if init == "new":
        import torch

        torch.manual_seed(seed)
        model = CSERModel.from_encoder(encoder, lstm_hidden_size=lstm_hidden_size or 512)
        return model, AutoFeatureExtractor.from_pretrained(encoder)
    return CSERModel.from_pretrained(init), AutoFeatureExtractor.from_pretrained(init)


class _Features:
    """Per-second encoder features of each clip, computed once (the encoder is frozen)."""

    def __init__(self, model, feature_extractor, clips: list[CorpusClip]) -> None:
        self.model, self.feature_extractor, self.clips = model, feature_extractor, clips
        self.memo: dict[int, tuple] = {}
        self.dropped = 0

    def __call__(self, index: int):
        import torch

        from eval_scripts.components.ser import label_columns
        from speecheq_dataset.audio import decode_audio

        if index not in self.memo:
            clip = self.clips[index]
            array, _ = decode_audio(clip.audio, 16_000)
            values = self.feature_extractor(array, sampling_rate=16_000, return_tensors="pt")["input_values"].to(self.model.device)
            with torch.no_grad():
                features, _ = self.model.second_features(values, [len(array)])
            seconds = features.shape[1]
            columns = label_columns(self.model.config.id2label)  # dimension name -> the model's output index
            labels = torch.zeros(seconds, len(columns))
            mask = torch.zeros(seconds, dtype=torch.bool)
            for second, values_by_name in clip.labels.items():
                if second >= seconds:
                    self.dropped += 1
                    continue
                for name, column in columns.items():
                    labels[second, column] = values_by_name[name]
                mask[second] = True
            self.memo[index] = (features[0].cpu(), labels, mask)
        return self.memo[index]


def _batch(items: list[tuple]):
    """Pad a list of (features, labels, mask) to the longest clip: features, valid-seconds mask, labels, labels mask."""
    import torch

    width = max(f.shape[0] for f, _, _ in items)
    features = torch.zeros(len(items), width, items[0][0].shape[1])
    seconds = torch.zeros(len(items), width, dtype=torch.bool)
    labels = torch.zeros(len(items), width, items[0][1].shape[1])
    labelled = torch.zeros(len(items), width, dtype=torch.bool)
    for row, (f, y, m) in enumerate(items):
        features[row, : len(f)], seconds[row, : len(f)], labels[row, : len(f)], labelled[row, : len(f)] = f, True, y, m
    return features, seconds, labels, labelled


def evaluate_ccc(model, features: _Features, indices: list[int]) -> dict[str, float]:
    """CCC per dimension over every labelled second of the given clips (eval mode)."""
    import torch

    from eval_scripts.components.cser import ccc

    if not indices:
        return {}
    model.eval()
    feats, seconds, labels, labelled = _batch([features(i) for i in indices])
    with torch.no_grad():
        logits = model(features=feats.to(model.device), seconds_mask=seconds.to(model.device)).logits.cpu()
    scored = seconds & labelled
    return {str(name): float(ccc(logits[..., i][scored], labels[..., i][scored])) for i, name in model.config.id2label.items()}


def train(args: argparse.Namespace) -> dict:
    """Train and save; returns the training log."""
    import torch

    from eval_scripts.runner import make_accelerator

    accelerator = make_accelerator()
    clips = read_corpus(args.data)
    train_idx = [i for i, c in enumerate(clips) if c.split != "valid"]
    valid_idx = [i for i, c in enumerate(clips) if c.split == "valid"]
    if not train_idx:
        raise ValueError(f"{args.data}: no training clips (every row has split=valid)")
    model, feature_extractor = build_model(args.init, encoder=args.encoder, lstm_hidden_size=args.lstm_hidden_size, seed=args.seed)
    model.to(accelerator.device)
    model.encoder.requires_grad_(False)  # frozen encoder: features computed once
    features = _Features(model, feature_extractor, clips)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=args.weight_decay)
    loader = torch.utils.data.DataLoader(train_idx, batch_size=args.batch_size, shuffle=True,
                                         generator=torch.Generator().manual_seed(args.seed), collate_fn=lambda idx: idx)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    core = accelerator.unwrap_model(model)
    log = {"settings": {k: v for k, v in vars(args).items()}, "steps": [], "dropped_rows": 0}
    step = 0
    while step < args.max_steps:
        for indices in loader:
            model.train()
            core.encoder.eval()  # no dropout in the frozen encoder (features are cached anyway)
            feats, seconds, labels, labelled = (t.to(accelerator.device) for t in _batch([features(i) for i in indices]))
            loss = model(features=feats, seconds_mask=seconds, labels=labels, labels_mask=labelled).loss
            optimizer.zero_grad()
            accelerator.backward(loss)
            if args.max_grad_norm:
                accelerator.clip_grad_norm_(trainable, args.max_grad_norm)
            optimizer.step()
            step += 1
            log["steps"].append({"step": step, "loss": float(loss.detach())})
            if step % args.log_every == 0 and accelerator.is_main_process:
                logger.info("step %d: CCC loss %.4f", step, float(loss.detach()))
            if step >= args.max_steps:
                break
    log["dropped_rows"] = features.dropped
    log["valid_ccc"] = evaluate_ccc(core, features, valid_idx)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        out = Path(args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        core.save_pretrained(out)
        feature_extractor.save_pretrained(out)
        (out / LOG_FILE).write_text(json.dumps(log, indent=2) + "\n", encoding="utf-8")
    return log


def build_parser() -> argparse.ArgumentParser:
    from eval_scripts.components.cser import DEFAULT_ENCODER

    p = argparse.ArgumentParser(prog="train_cser", description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--data", required=True, help="corpus table (CSV or parquet) in the documented layout")
    p.add_argument("--output-dir", required=True, help="where the trained model, its feature extractor and training_log.json go")
    p.add_argument("--overwrite", action="store_true", help="replace the files of a model saved earlier in --output-dir")
    p.add_argument("--init", default="new", help="new (a fresh head on --encoder), tiny-random, or a saved CSER folder to continue")
    p.add_argument("--encoder", default=DEFAULT_ENCODER, help="speech encoder of a new model (Hub id or folder)")
    p.add_argument("--lstm-hidden-size", type=int, default=None, help="BiLSTM width of a new model (default 512; tiny-random: 16)")
    p.add_argument("--max-steps", type=int, default=2000, help="optimiser steps")
    p.add_argument("--batch-size", type=int, default=8, help="clips per step (per process)")
    p.add_argument("--lr", type=float, default=1e-3, help="AdamW learning rate")
    p.add_argument("--weight-decay", type=float, default=0.0, help="AdamW weight decay")
    p.add_argument("--max-grad-norm", type=float, default=1.0, help="gradient clipping (0: off)")
    p.add_argument("--seed", type=int, default=0, help="seed of the head's init and of the clip order")
    p.add_argument("--log-every", type=int, default=50, help="log the loss every N steps")
    return p


def check_arguments(args: argparse.Namespace) -> None:
    """Mistakes found before any training: bad counts, or an output folder that already holds something."""
    if args.max_steps < 1 or args.batch_size < 1:
        raise ValueError(f"--max-steps and --batch-size must be >= 1, got {args.max_steps} and {args.batch_size}")
    out = Path(args.output_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--output-dir {out} is a file")
    if out.is_dir() and any(out.iterdir()) and not args.overwrite:  # checked now, not after hours of training
        raise ValueError(f"--output-dir {out} is not empty; pass --overwrite to replace a model saved there, or choose a new folder")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        check_arguments(args)
        log = train(args)
    except USER_MISTAKES as exc:
        print(f"train_cser: error: {one_line(exc)}", file=sys.stderr)
        return 2
    losses = [s["loss"] for s in log["steps"]]
    print(f"trained {len(losses)} steps: CCC loss {np.mean(losses[:5]):.4f} (first 5) -> {np.mean(losses[-5:]):.4f} (last 5); "
          f"valid CCC {log['valid_ccc'] or 'n/a'}; saved to {args.output_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
