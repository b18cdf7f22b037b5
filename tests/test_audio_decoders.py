"""Issue 11: decoding without FFmpeg. soundfile stands in for torchcodec, in the builder, the loader and the runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import PROJECT_ROOT
from speecheq_dataset import audio

BLOCK_TORCHCODEC = "import sys; sys.modules['torchcodec'] = None  # as on an image without FFmpeg\n"


@pytest.fixture
def decoder(monkeypatch):
    """Switch the decoder for one test (the choice is cached per process)."""
    def use(name: str) -> None:
        monkeypatch.setenv(audio.DECODER_ENV, name)
        monkeypatch.setattr(audio, "_decoder", None)

    yield use
    monkeypatch.setattr(audio, "_decoder", None)


@pytest.mark.slow
def test_both_decoders_give_the_same_lengths_at_16_khz_and_the_same_samples(real_raw_dir, decoder):
    clips = sorted(real_raw_dir.glob("*/*/audio/*.mp3"))[::9][:24]
    decoded = {}
    for name in ("torchcodec", "soundfile"):
        decoder(name)
        assert audio.audio_decoder() == name
        decoded[name] = [(audio.decode_audio(p, 16_000), audio.decode_audio(p)) for p in clips]
    for ((tc16, _), (tc, tc_rate)), ((sf16, _), (sf, sf_rate)) in zip(decoded["torchcodec"], decoded["soundfile"]):
        assert len(tc16) == len(sf16) and tc_rate == sf_rate == 24_000
        assert len(tc) == len(sf) and np.max(np.abs(tc - sf)) < 1e-4  # the same MP3 frames, two decoders


def test_the_soundfile_decoder_names_bad_and_empty_clips(decoder, tmp_path):
    decoder("soundfile")
    with pytest.raises(audio.AudioDecodeError, match="clip.mp3: cannot decode audio"):
        audio.decode_audio(b"not audio at all" * 20, name="clip.mp3")
    silent = audio.encode_wav(np.zeros(0, dtype=np.float32), 16_000)
    with pytest.raises(audio.EmptyAudioError, match="no samples"):
        audio.decode_audio(silent, name="empty.wav")


def test_an_unknown_forced_decoder_is_named(decoder):
    decoder("ffmpeg7")
    with pytest.raises(ValueError, match="SPEECHEQ_AUDIO_DECODER='ffmpeg7'"):
        audio.audio_decoder()


@pytest.mark.slow
def test_build_and_a_prosody_run_work_with_torchcodec_unimportable(real_raw_dir, tmp_path):
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    script = BLOCK_TORCHCODEC + (
        "from speecheq_cli.main import main\n"
        f"assert main(['dataset', 'build', {str(real_raw_dir)!r}, {str(tmp_path / 'export')!r}]) == 0\n"
        f"sys.exit(main(['eval', '--model', 'prosody', '--dataset', {str(tmp_path / 'export')!r}, '--output-dir', "
        f"{str(tmp_path / 'run')!r}, '--no-progress', '--n-bootstrap', '0']))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.count("decoding audio with soundfile: torchcodec cannot load") == 1  # said once, for build and run
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    # The published figures of the `slower` rule on these 45 dialogues (README), reproduced without FFmpeg.
    assert results["metrics"]["n_dialogues"] == 45
    assert (results["metrics"]["acc_turn4"], results["metrics"]["acc_traj"]) == pytest.approx((0.7778, 0.6444), abs=1e-4)
