"""SpeechEQ metric: forced-choice accuracies, SEQ and EMO-Reasoning scores (SPEC §6-7).

The core is small numpy modules (accuracy, seq, dtw, vad for the ERS inputs,
ers, ers_discrete, multibench for Multi-Bench's answer formats and judge
ratings; the numba kernels in kernels); the `evaluate` wrapper is
`speecheq_metric/speecheq_metric.py`. Load it with
`evaluate.load("speecheq_metric")` from a checkout root, with
`evaluate.load(speecheq_metric.MODULE_PATH)` from anywhere once installed, or
with `evaluate.load("SpeechEQ/speecheq")` from the Hub once the Space is published.
"""

from __future__ import annotations

from pathlib import Path

from .accuracy import forced_choice_metrics
from .accuracy import majority_vote
from .accuracy import score_choices
from .dtw import dtw_distance
from .dtw import dtw_many
from .dtw import dtw_python
from .dtw import fastdtw_distance
from .ers import DialogueScores
from .ers import ERSParams
from .ers import TurnScores
from .ers import ers_dialogues
from .ers import ers_summary
from .ers import ers_table
from .ers import ers_turns
from .ers_discrete import CATEGORICAL_MATRIX
from .ers_discrete import categorical_ers
from .ers_discrete import perceptual_ers
from .multibench import grouped_mean_ci
from .multibench import multi_choice_scores
from .multibench import score_length_correlation
from .multibench import semi_open_scores
from .multibench import single_choice_scores
from .seq import ReferenceCohort
from .seq import freeze_cohort
from .seq import rank_agreement
from .seq import seq_per_subscale
from .seq import seq_report
from .seq import seq_scores
from .seq import spearman_rho
from .taxonomy import COMPOSITE_SUBSCALES
from .taxonomy import SUBSCALE_TO_COMPOSITE
from .vad import as_vad
from .vad import read_vad_csv

# The folder holding speecheq_metric.py: pass it to evaluate.load from an installed package.
MODULE_PATH: str = str(Path(__file__).resolve().parent)

__all__ = [
    "CATEGORICAL_MATRIX",
    "COMPOSITE_SUBSCALES",
    "DialogueScores",
    "ERSParams",
    "MODULE_PATH",
    "ReferenceCohort",
    "SUBSCALE_TO_COMPOSITE",
    "TurnScores",
    "as_vad",
    "categorical_ers",
    "dtw_distance",
    "dtw_many",
    "dtw_python",
    "ers_dialogues",
    "ers_summary",
    "ers_table",
    "ers_turns",
    "fastdtw_distance",
    "forced_choice_metrics",
    "freeze_cohort",
    "grouped_mean_ci",
    "majority_vote",
    "multi_choice_scores",
    "perceptual_ers",
    "rank_agreement",
    "read_vad_csv",
    "score_choices",
    "score_length_correlation",
    "semi_open_scores",
    "seq_per_subscale",
    "seq_report",
    "seq_scores",
    "single_choice_scores",
    "spearman_rho",
]
