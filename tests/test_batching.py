"""--batch-size auto (eval_scripts/batching.py): the largest batch that fits, found by halving on out-of-memory, kept for the run."""

from __future__ import annotations

import json
import logging

import pytest
import torch

from eval_scripts import batching
from eval_scripts import runner
from eval_scripts import store
from eval_scripts.models.base import ChoiceModel
from eval_scripts.models.base import ModelOutput
from eval_scripts.run import build_parser
from eval_scripts.run import config_from_args


@pytest.mark.parametrize("text, expected", [("auto", "auto"), ("AUTO", "auto"), ("1", 1), ("32", 32), (7, 7)])
def test_batch_size_values(text, expected):
    assert batching.parse_batch_size(text) == expected


@pytest.mark.parametrize("text", ["0", "-2", "big", "1.5"])
def test_bad_batch_sizes_are_named(text):
    with pytest.raises(ValueError, match="--batch-size"):
        batching.parse_batch_size(text)


@pytest.mark.parametrize(
    "exc, oom",
    [
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), True),
        (RuntimeError("CUDA error: out of memory"), True),
        (RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory: you tried to allocate 2 GB"), True),
        (MemoryError(), True),
        (RuntimeError("shape mismatch"), False),
        (ValueError("out of memory"), False),  # only allocation failures count, not any message
    ],
)
def test_out_of_memory_is_recognised(exc, oom):
    assert batching.is_out_of_memory(exc) is oom


def test_a_fixed_batch_size_never_shrinks():
    size = batching.BatchSize(8)
    assert size.size == 8 and not size.shrink(torch.OutOfMemoryError("out of memory"), attempted=8) and size.size == 8


@pytest.mark.parametrize("attempted, after", [(64, 32), (10, 5), (3, 1), (1, None)])
def test_auto_halves_the_batch_that_failed(attempted, after):
    size = batching.BatchSize("auto")
    assert size.size == batching.AUTO_START
    assert size.shrink(torch.OutOfMemoryError("out of memory"), attempted=attempted) is (after is not None)
    assert size.size == (after or batching.AUTO_START)
    assert not size.shrink(RuntimeError("a bug, not memory"), attempted=attempted)


class Cramped(ChoiceModel):
    """Answers from each query's seed; runs out of memory on a batch of more than `fits` queries."""

    name = "cramped"
    modes = frozenset({"generate", "logprob"})

    def __init__(self, fits: int) -> None:
        self.fits = fits
        self.calls: list[tuple[int, bool]] = []  # (batch length, ran out of memory)

    def generate(self, queries):
        too_big = len(queries) > self.fits
        self.calls.append((len(queries), too_big))
        if too_big:
            raise torch.OutOfMemoryError(f"CUDA out of memory (batch of {len(queries)})")
        return [ModelOutput(text=json.dumps({"selected": f"Option {1 + q.seed % 2}"}), input_tokens=10, output_tokens=3) for q in queries]

    score = generate


def _answers(run_dir):
    return [(r.uid, r.raw, r.choice) for _, r in store.iter_rounds(store.read_samples(run_dir))]


def test_auto_finds_the_largest_batch_that_fits_and_keeps_it(real_rows, tmp_path, caplog):
    reference = runner.run(runner.RunConfig(model="cramped", output_dir=str(tmp_path / "b1"), batch_size=1, n_bootstrap=0),
                           model=Cramped(fits=1), dataset=real_rows, progress=False)
    model = Cramped(fits=3)
    with caplog.at_level(logging.WARNING):
        results = runner.run(runner.RunConfig(model="cramped", output_dir=str(tmp_path / "auto"), batch_size="auto", n_bootstrap=0),
                             model=model, dataset=real_rows, progress=False)
    assert _answers(tmp_path / "auto") == _answers(tmp_path / "b1") and results["metrics"] == reference["metrics"]
    assert results["failed_dialogues"] == [] and results["config"]["batch_size"] == "auto"
    # Round 1 of four dialogues: 4 queries -> out of memory -> 2 fits, and 2 is kept for round 2: one failure in the whole run.
    assert model.calls == [(4, True), (2, False), (2, False), (2, False), (2, False)]
    assert results["deployment"]["session"]["batch_size"] == 2
    assert [r.getMessage() for r in caplog.records if r.name == batching.__name__] == ["out of memory at batch size 4; --batch-size auto continues with 2"]


def test_out_of_memory_at_a_fixed_batch_size_is_an_error_of_those_queries(real_rows, tmp_path):
    """No silent shrinking without `auto`: the batch is retried one by one (the runner's rule for any failure)."""
    results = runner.run(runner.RunConfig(model="cramped", output_dir=str(tmp_path / "b4"), batch_size=4, n_bootstrap=0),
                         model=Cramped(fits=1), dataset=real_rows.select(range(2)), progress=False)
    assert results["failed_dialogues"] == [] and results["deployment"]["session"]["batch_size"] == 4


def test_the_cli_takes_auto():
    config = config_from_args(build_parser().parse_args(["--model", "random", "--output-dir", "x", "--batch-size", "auto"]))
    assert config.batch_size == "auto"
    config.validate()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--model", "random", "--output-dir", "x", "--batch-size", "0"])
