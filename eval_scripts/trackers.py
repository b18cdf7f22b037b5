"""Optional experiment trackers for a finished run: Weights & Biases and TensorBoard.

Off unless asked for (`--wandb-args`, `--tensorboard-dir`), never required: the
package is looked for when the run starts, so a missing one fails in one line
before any work. Each logger gets results.json's content, which holds no secret.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable

from eval_scripts.scoring import FLAT_KEYS


def flat_metrics(results: dict) -> dict[str, float]:
    """The headline numbers of a run, as scalars (None values left out)."""
    metrics = results.get("metrics") or {}
    flat = {f"speecheq/{key}": metrics[key] for key in FLAT_KEYS if isinstance(metrics.get(key), (int, float))}
    for slug, values in (results.get("per_subscale") or {}).items():
        if isinstance(values, dict) and isinstance(values.get("acc_traj"), (int, float)):
            flat[f"speecheq/per_subscale/{slug}/acc_traj"] = values["acc_traj"]
    return flat


def _require(module: str, package: str, flag: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise ImportError(f"{flag} needs the {package} package, which is not installed: pip install {package}")


def wandb_logger(init_args: dict) -> Callable[[dict], None]:
    """A logger sending the metrics and config of a finished run to one W&B run (init_args go to wandb.init)."""
    _require("wandb", "wandb", "--wandb-args")

    def log(results: dict) -> None:
        wandb = importlib.import_module("wandb")
        run = wandb.init(**{"name": results.get("label"), **init_args}, config=results.get("config") or {})
        run.log(flat_metrics(results))
        run.summary.update({"dataset_fingerprint": results.get("dataset_fingerprint"), "git_hash": results.get("git_hash")})
        run.finish()

    return log


def tensorboard_logger(log_dir: str) -> Callable[[dict], None]:
    """A logger writing the metrics of a finished run as TensorBoard scalars (and its label and config as text)."""
    _require("tensorboard", "tensorboard", "--tensorboard-dir")

    def log(results: dict) -> None:
        import json

        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(log_dir=log_dir)
        try:
            for key, value in flat_metrics(results).items():
                writer.add_scalar(key, value, global_step=0)
            writer.add_text("speecheq/label", str(results.get("label")), global_step=0)
            writer.add_text("speecheq/config", "```\n" + json.dumps(results.get("config"), indent=2) + "\n```", global_step=0)
        finally:
            writer.close()

    return log
