"""Shared test fixtures: project-local caches and the authors' real data in ../shared."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = PROJECT_ROOT.parent / "shared" / "data"
REAL_RAW_DIR = SHARED_DATA / "speecheq-arena-v1"
MODEL_RESPONSES_DIR = SHARED_DATA / "model-responses"

# Keep every cache inside the project: tests never write to ~/.cache.
# (Set here, in the test harness; the library itself never overrides HF_HOME.)
_CACHE = PROJECT_ROOT / ".cache"
os.environ["HF_HOME"] = str(_CACHE / "hf")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLCONFIGDIR", str(_CACHE / "matplotlib"))
os.environ.setdefault("NUMBA_CACHE_DIR", str(_CACHE / "numba"))
# One torch thread (subprocesses inherit it): the tests run tiny models, whose ops are too small to
# split, and two threads on a busy 2-core machine made them up to 2x slower end to end.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# Property tests: no per-example deadline (CI machines are shared and slow);
# failures print the reproduction blob.
settings.register_profile("speecheq", deadline=None, print_blob=True)
settings.load_profile("speecheq")


@pytest.fixture(scope="session")
def real_raw_dir() -> Path:
    """The 45 real v1 dialogues (read-only: copy before changing anything)."""
    if not REAL_RAW_DIR.is_dir():
        pytest.fail(f"real data missing at {REAL_RAW_DIR}: the tests need ../shared beside the checkout")
    return REAL_RAW_DIR


@pytest.fixture(scope="session")
def model_responses_dir() -> Path:
    """The authors' recorded outputs of three systems on 15 v2 dialogues."""
    if not MODEL_RESPONSES_DIR.is_dir():
        pytest.fail(f"real model outputs missing at {MODEL_RESPONSES_DIR}")
    return MODEL_RESPONSES_DIR


def writable_copy(dialogue_folder: Path, dest_root: Path) -> Path:
    """A writable copy of a real dialogue folder at dest_root/<subscale slug>/<dialogue id> (the shared data is read-only)."""
    folder = dest_root / dialogue_folder.parent.name / dialogue_folder.name
    shutil.copytree(dialogue_folder, folder, copy_function=shutil.copyfile)
    for path in folder.rglob("*"):
        path.chmod(0o644 if path.is_file() else 0o755)
    folder.chmod(0o755)
    return folder


@pytest.fixture(scope="session")
def copy_dialogue():
    """`writable_copy`, for tests that damage a real dialogue."""
    return writable_copy


@pytest.fixture(scope="module")
def real_rows(real_raw_dir):
    """The first four real dialogues with audio undecoded, as the runner holds them."""
    from eval_scripts import runner

    config = runner.RunConfig(model="random", output_dir="unused", dataset=str(real_raw_dir), limit=4)
    return runner.first_rows(runner.load_dataset_rows(config), config.limit)


@pytest.fixture(scope="module")
def dialogues(real_rows):
    """`real_rows` decoded at 16 kHz, the models' rate."""
    from eval_scripts import runner

    return [runner.dialogue_from_row(real_rows[i], 16000) for i in range(len(real_rows))]


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch on one thread for a module of tiny-model tests, then as before.

    Tiny models do many small ops; on the shared 2-core machine a busy second core made
    torch's two threads wait on each other (a 16-channel conv1d took ~20 ms on 2 threads
    and ~0.06 ms on one).
    """
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
