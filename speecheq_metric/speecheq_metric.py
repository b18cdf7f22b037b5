"""The SpeechEQ evaluate module (speecheq.py in the Hub Space): a thin evaluate.Metric over the numpy core in this folder.

evaluate copies this file and the sibling files it imports (one level only)
into its modules cache, so every core file is imported here directly, one
import per line, even where this wrapper does not use it.
"""

from __future__ import annotations

import datasets
import evaluate

from .accuracy import forced_choice_metrics
from .accuracy import score_choices
from .dtw import dtw_distance
from .ers import ers_turns
from .ers_discrete import categorical_ers
from .kernels import BACKEND
from .multibench import multi_choice_scores
from .seq import seq_scores
from .taxonomy import SUBSCALE_SLUGS
from .vad import as_vad

_CORE = (dtw_distance, ers_turns, seq_scores, BACKEND, SUBSCALE_SLUGS, as_vad, multi_choice_scores)  # imported so evaluate copies every core file (one level only)

_CITATION = """\
@misc{speecheq,
  author = {Wu and Chen and Wu and Yang and Shen},
  title  = {{SpeechEQ}: emotional intelligence of speech-language models},
  note   = {arXiv:2606.25990},
}
@misc{emoreasoning,
  author = {Liu and others},
  title  = {{EMO-Reasoning}: emotion reasoning scores for spoken dialogue systems},
  note   = {arXiv:2508.17623},
}
"""

_DESCRIPTION = """\
SpeechEQ asks a speech-language model, twice per six-turn dialogue, to pick
which of two recordings of the same words is delivered with the higher
emotional intelligence (turn 4, then turn 6 after its own turn-4 choice).
This module scores those forced choices: Acc1 (turn 4), Acc2 (turn 6),
Acc_all (all decisions) and Acc_traj (both turns right; the primary number),
with the invalid-answer rate, seeded bootstrap 95% intervals and, given the
EQ-i 2.0 subscale of each dialogue, per-subscale and per-composite breakdowns.
The `categorical_ers` configuration scores emotion-label pairs with the
EMO-Reasoning matrix. Cohort SEQ, Spearman rho and the continuous ERS live in
the same package as plain functions (see the metric card).
"""

_KWARGS_DESCRIPTION = """
Args (default configuration):
    predictions (list of [int, int]): per dialogue, the model's choice at turn 4
        and at turn 6: 1 or 2; 0 or None when the answer was missing or unparseable
        (counted as wrong and in `invalid_rate`).
    references (list of [int, int]): per dialogue, the high-EQ option at turn 4
        and turn 6 (1 or 2).
    subscales (list of str, optional): per dialogue, the full subscale slug
        (e.g. "interpersonal_empathy") for the breakdowns.
    n_bootstrap (int, optional, default 1000): bootstrap resamples of dialogues
        for the 95% intervals; 0 switches them off.
    seed (int, optional, default 0): seed of the bootstrap.
Args (config "categorical_ers"):
    predictions (list of str): the model's emotion label per turn.
    references (list of str): the user's emotion label per turn
        (neutral, happy, angry or sad; any case).
Returns (default configuration):
    acc_turn4, acc_turn6, acc_all, acc_traj, invalid_rate (float in [0, 1]),
    n_dialogues (int), ci95 ({metric: [low, high]}), and with subscales
    per_subscale and per_composite ({slug: the same keys}).
Returns (config "categorical_ers"):
    categorical_ers (float in [0.1, 1.0]).
Examples:
    >>> import evaluate
    >>> speecheq = evaluate.load("speecheq_metric")
    >>> results = speecheq.compute(predictions=[[1, 2], [2, 2], [0, 1]],
    ...                            references=[[1, 2], [1, 2], [2, 1]], n_bootstrap=0)
    >>> [round(results[k], 4) for k in ("acc_turn4", "acc_turn6", "acc_all", "acc_traj", "invalid_rate")]
    [0.3333, 1.0, 0.6667, 0.3333, 0.1667]

    >>> results = speecheq.compute(predictions=[[1, 2], [2, 1]], references=[[1, 2], [1, 1]],
    ...                            subscales=["interpersonal_empathy", "stress_management_optimism"], seed=1)
    >>> results["acc_traj"], results["per_subscale"]["interpersonal_empathy"]["acc_traj"]
    (0.5, 1.0)
    >>> results["per_composite"]["stress_management"]["acc_turn6"], results["ci95"]["acc_traj"]
    (1.0, [0.0, 1.0])

    >>> ers = evaluate.load("speecheq_metric", "categorical_ers")
    >>> ers.compute(predictions=["happy", "Sad"], references=["happy", "sad"])
    {'categorical_ers': 0.95}
"""

CONFIGS = ("default", "categorical_ers")


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class SpeechEQMetric(evaluate.Metric):
    """Forced-choice accuracies of SpeechEQ (default) and categorical EMO-Reasoning ERS."""

    def _info(self) -> evaluate.MetricInfo:
        if self.config_name not in CONFIGS:
            raise ValueError(f"unknown speecheq_metric config {self.config_name!r}; expected one of {CONFIGS}")
        if self.config_name == "categorical_ers":
            features = datasets.Features({"predictions": datasets.Value("string"), "references": datasets.Value("string")})
        else:
            features = datasets.Features(
                {
                    "predictions": datasets.Sequence(datasets.Value("int32")),
                    "references": datasets.Sequence(datasets.Value("int32")),
                }
            )
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=features,
            reference_urls=["https://arxiv.org/abs/2606.25990", "https://arxiv.org/abs/2508.17623"],
        )

    def _validate(self, predictions, references) -> None:
        """Check raw inputs before Arrow casts them, so a bad value is named (e.g. 1.5 or "1")."""
        if predictions is None or references is None:
            return
        if self.config_name == "categorical_ers":
            categorical_ers(references, predictions)
        else:
            score_choices(predictions, references)

    def add_batch(self, *, predictions=None, references=None, **kwargs):
        """Validate a batch (ValueError naming a bad value), then add it."""
        self._validate(predictions, references)
        return super().add_batch(predictions=predictions, references=references, **kwargs)

    def add(self, *, prediction=None, reference=None, **kwargs):
        """Validate one dialogue's pair (ValueError naming a bad value), then add it."""
        if prediction is not None and reference is not None:
            self._validate([prediction], [reference])
        return super().add(prediction=prediction, reference=reference, **kwargs)

    def compute(self, *, predictions=None, references=None, **kwargs):
        """Validate the inputs (ValueError naming a bad value), then compute the scores described in the class docstring."""
        self._validate(predictions, references)
        return super().compute(predictions=predictions, references=references, **kwargs)

    def _compute(self, predictions, references, subscales=None, n_bootstrap: int = 1000, seed: int = 0):
        if self.config_name == "categorical_ers":
            return {"categorical_ers": categorical_ers(references, predictions)}
        return forced_choice_metrics(predictions, references, subscales, n_bootstrap=n_bootstrap, seed=seed)
