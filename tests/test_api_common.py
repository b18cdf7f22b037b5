"""Helpers shared by every HTTP API client (speecheq_dataset.http_api, .secrecy, .audio): WAV encoding, Retry-After, backoff, scrubbing, cost, ordered concurrency."""

from __future__ import annotations

import email.utils
import io
import random
import threading
import time
import wave

import numpy as np
import pytest

from speecheq_dataset.audio import encode_wav
from speecheq_dataset.http_api import RetryPolicy
from speecheq_dataset.http_api import cost_usd
from speecheq_dataset.http_api import is_retryable_status
from speecheq_dataset.http_api import map_in_order
from speecheq_dataset.http_api import parse_retry_after
from speecheq_dataset.http_api import read_api_key
from speecheq_dataset.http_api import redact_url
from speecheq_dataset.secrecy import scrub


def read_wav(data: bytes) -> tuple[np.ndarray, int, int, int]:
    with wave.open(io.BytesIO(data)) as w:
        frames = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
        return frames, w.getframerate(), w.getnchannels(), w.getsampwidth()


def test_wav_is_mono_16_bit_at_the_source_rate_and_round_trips():
    samples = np.array([0.0, 0.5, -0.5, 1.0, -1.0, 2.0], dtype=np.float32)  # 2.0 clips to full scale
    frames, rate, channels, width = read_wav(encode_wav(samples, 24_000))
    assert (rate, channels, width) == (24_000, 1, 2)
    assert frames.tolist() == [0, 16384, -16384, 32767, -32767, 32767]


def test_wav_resamples_to_the_target_rate():
    t = np.arange(24_000) / 24_000
    frames, rate, _, _ = read_wav(encode_wav((0.5 * np.sin(2 * np.pi * 300 * t)).astype(np.float32), 24_000, 16_000))
    assert rate == 16_000 and len(frames) == 16_000
    assert np.abs(frames).max() == pytest.approx(0.5 * 32767, rel=0.02)


def test_wav_rejects_multichannel_input():
    with pytest.raises(ValueError, match="mono"):
        encode_wav(np.zeros((2, 10), dtype=np.float32), 16_000)


@pytest.mark.parametrize("value, expected", [("7", 7.0), ("0", 0.0), ("1.5", 1.5), (None, None), ("", None), ("soon", None), ("-3", 0.0)])
def test_retry_after_seconds(value, expected):
    assert parse_retry_after(value) == expected


def test_retry_after_http_date():
    later = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert parse_retry_after(later) == pytest.approx(30, abs=2)
    assert parse_retry_after(email.utils.formatdate(time.time() - 30, usegmt=True)) == 0.0


def test_backoff_grows_exponentially_with_jitter_and_a_cap():
    policy = RetryPolicy(max_attempts=8, backoff_base_s=1.0, backoff_max_s=10.0)
    rng = random.Random(0)
    for attempt, cap in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (7, 10.0)]:
        delays = [policy.delay(attempt, rng=rng) for _ in range(200)]
        assert cap / 2 <= min(delays) and max(delays) <= cap
        assert max(delays) - min(delays) > cap / 4  # really jittered


def test_backoff_respects_retry_after_up_to_its_cap():
    policy = RetryPolicy(retry_after_max_s=20.0)
    assert policy.delay(1, retry_after=7.0) == 7.0
    assert policy.delay(1, retry_after=3600.0) == 20.0


@pytest.mark.parametrize("status, retry", [(429, True), (500, True), (503, True), (408, True), (400, False), (401, False), (404, False)])
def test_retryable_statuses(status, retry):
    assert is_retryable_status(status) == retry


def test_scrub_and_url_redaction():
    assert scrub("bad key sk-abc, again sk-abc", ["sk-abc", None]) == "bad key ***, again ***"
    assert redact_url("http://user:secret@127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/v1"


def test_missing_key_names_the_variable(monkeypatch):
    monkeypatch.delenv("SPEECHEQ_TEST_KEY", raising=False)
    with pytest.raises(ValueError, match="SPEECHEQ_TEST_KEY"):
        read_api_key("SPEECHEQ_TEST_KEY", required=True)
    assert read_api_key("SPEECHEQ_TEST_KEY", required=False) is None
    monkeypatch.setenv("SPEECHEQ_TEST_KEY", " k ")
    assert read_api_key("SPEECHEQ_TEST_KEY", required=True) == "k"


def test_cost_from_prices_per_million_tokens():
    assert cost_usd(1_000_000, 500_000, 2.5, 10.0) == pytest.approx(7.5)
    assert cost_usd(1200, 300, 40.0, None) == pytest.approx(0.048)
    assert cost_usd(1200, 300, None, None) is None
    assert cost_usd(None, 300, 1.0, 1.0) is None


def test_map_in_order_keeps_input_order_and_bounds_concurrency():
    active, peak, lock = [0], [0], threading.Lock()

    def work(i: int) -> int:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.02 * (5 - i % 5))  # early items finish last
        with lock:
            active[0] -= 1
        return i * i

    assert map_in_order(work, list(range(12)), concurrency=3) == [i * i for i in range(12)]
    assert 1 < peak[0] <= 3
