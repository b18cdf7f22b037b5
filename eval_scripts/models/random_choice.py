"""`random`: the chance baseline. Each query's pick comes from its own seed, so
results do not depend on batching, sharding or resuming."""

from __future__ import annotations

import time

import numpy as np

from eval_scripts.models.base import ChoiceModel
from eval_scripts.models.base import ChoiceQuery
from eval_scripts.models.base import ModelOutput
from eval_scripts.models.base import register


@register("random")
class RandomChoice(ChoiceModel):
    """Picks Option 1 or Option 2 uniformly from the query's seed (and an optional offset)."""

    name = "random"
    reads_prompt = False  # it compares the two option clips; it answers no other question
    modes = frozenset({"generate", "logprob"})

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)

    def _pick(self, query: ChoiceQuery) -> int:
        return int(np.random.default_rng([self.seed, query.seed]).integers(1, 3))

    def generate(self, queries: list[ChoiceQuery]) -> list[ModelOutput]:
        """A JSON answer naming a random option (goes through the same parser as any model)."""
        out = []
        for query in queries:
            start = time.perf_counter()
            choice = self._pick(query)
            text = f'{{"reasoning": "uniform random pick", "selected": "Option {choice}"}}'
            out.append(ModelOutput(text=text, latency_s=time.perf_counter() - start))
        return out

    def score(self, queries: list[ChoiceQuery]) -> list[ModelOutput]:
        """Logprob mode: log 0.5 for both options, the pick breaks the tie."""
        out = []
        for query in queries:
            start = time.perf_counter()
            choice = self._pick(query)
            out.append(ModelOutput(choice=choice, option_logprobs=(float(np.log(0.5)),) * 2, latency_s=time.perf_counter() - start))
        return out

    def describe(self) -> dict:
        return {"name": self.name, "seed": self.seed, "weights": "none (uniform random choice)"}
