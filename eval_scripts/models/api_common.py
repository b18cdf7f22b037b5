"""What the HTTP API adapters share: WAV encoding, keys, retries with backoff, concurrency, cost.

A failed query never raises out of `generate`: after a bounded number of
attempts it becomes a ModelOutput with `error` set, and the run goes on
(the runner reports it). The API key is read from the environment only, sent
in a header, and scrubbed from every message this module produces.
"""

from __future__ import annotations

import base64
import email.utils
import io
import logging
import math
import os
import random
import time
import wave
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from eval_scripts.models.base import ChoiceModel, ChoiceQuery, Clip, ModelOutput
from speecheq_dataset.audio import resample

logger = logging.getLogger(__name__)

REDACTED = "***"
RETRYABLE_STATUS = frozenset({408, 409, 425, 429})  # plus every 5xx


def encode_wav(array: np.ndarray, sampling_rate: int, target_rate: int | None = None) -> bytes:
    """Mono 16-bit PCM WAV bytes, resampled to `target_rate` when given."""
    samples = np.asarray(array, dtype=np.float32)
    if samples.ndim != 1:
        raise ValueError(f"encode_wav: expected mono samples, got shape {samples.shape}")
    if target_rate:
        samples, sampling_rate = resample(samples, sampling_rate, target_rate), target_rate
    pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).round().astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(int(sampling_rate))
        out.writeframes(pcm.tobytes())
    return buffer.getvalue()


def clip_to_base64_wav(clip: Clip, target_rate: int | None) -> str:
    """A clip as base64 WAV text, the form both APIs take inline."""
    return base64.b64encode(encode_wav(clip.array, clip.sampling_rate, target_rate)).decode("ascii")


def read_api_key(env_var: str, *, required: bool) -> str | None:
    """The key from environment variable `env_var`; a missing required key names the variable, never a value."""
    key = os.environ.get(env_var, "").strip()
    if not key and required:
        raise ValueError(f"no API key: set the environment variable {env_var} (keys are read from the environment only)")
    return key or None


def scrub(text: str, secrets: list[str | None]) -> str:
    """`text` with every secret replaced by ***."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def redact_url(url: str) -> str:
    """A URL without user:password@ credentials (base URLs go into results)."""
    import httpx

    parsed = httpx.URL(url)
    if parsed.userinfo:
        parsed = parsed.copy_with(username=None, password=None)
    return str(parsed).rstrip("/")


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta seconds or an HTTP date); None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries: exponential backoff with jitter, Retry-After respected up to a cap."""

    max_attempts: int = 6
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    retry_after_max_s: float = 300.0

    def delay(self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to sleep after failed attempt number `attempt` (1-based)."""
        if retry_after is not None:
            return min(retry_after, self.retry_after_max_s)
        cap = min(self.backoff_max_s, self.backoff_base_s * 2 ** (attempt - 1))
        # "Equal jitter": at least half the exponential step, so retries never bunch at ~0 s.
        return cap / 2 + (rng or random).uniform(0, cap / 2)


class ApiCallError(Exception):
    """A query that failed for good (after retries, or at once for a non-retryable answer); message already scrubbed."""


def is_retryable_status(status: int) -> bool:
    return status in RETRYABLE_STATUS or 500 <= status <= 599


def post_json(
    client,
    url: str,
    *,
    headers: dict[str, str],
    body: dict,
    policy: RetryPolicy,
    secrets: list[str | None],
    label: str,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[dict, float]:
    """POST `body` as JSON with retries; returns (decoded JSON object, latency of the successful attempt in s).

    Retries connection errors, timeouts, 408/409/425/429 and 5xx; other statuses and
    bodies that are not a JSON object fail at once. Raises ApiCallError.
    """
    import httpx

    last_problem = ""
    for attempt in range(1, policy.max_attempts + 1):
        retry_after = None
        start = time.perf_counter()
        try:
            response = client.post(url, headers=headers, json=body)
        except httpx.TransportError as exc:  # connection refused/reset, timeouts, protocol errors
            last_problem = f"{type(exc).__name__}: {exc}"
        else:
            latency = time.perf_counter() - start
            if response.status_code == 200:
                try:
                    decoded = response.json()
                except ValueError:
                    raise ApiCallError(scrub(f"{label}: malformed response body (not JSON): {response.text[:200]!r}", secrets)) from None
                if not isinstance(decoded, dict):
                    raise ApiCallError(scrub(f"{label}: malformed response body (not a JSON object): {response.text[:200]!r}", secrets))
                return decoded, latency
            last_problem = f"HTTP {response.status_code}: {response.text[:300]}"
            if not is_retryable_status(response.status_code):
                raise ApiCallError(scrub(f"{label}: {last_problem}", secrets))
            retry_after = parse_retry_after(response.headers.get("retry-after"))
        if attempt < policy.max_attempts:
            wait = policy.delay(attempt, retry_after)
            logger.info("%s: attempt %d/%d failed (%s); retrying in %.2f s", label, attempt, policy.max_attempts,
                        scrub(last_problem, secrets)[:120], wait)
            sleep(wait)
    raise ApiCallError(scrub(f"{label}: gave up after {policy.max_attempts} attempts; last error: {last_problem}", secrets))


def cost_usd(input_tokens: int | None, output_tokens: int | None, price_in: float | None, price_out: float | None) -> float | None:
    """Cost of one call from token counts and prices in USD per 1M tokens; None when either is unknown."""
    if price_in is None and price_out is None:
        return None
    if input_tokens is None or output_tokens is None:
        return None
    return (input_tokens * (price_in or 0.0) + output_tokens * (price_out or 0.0)) / 1_000_000


def map_in_order(function: Callable, items: list, concurrency: int) -> list:
    """function(item) for every item, at most `concurrency` at a time; results in input order."""
    if concurrency <= 1 or len(items) <= 1:
        return [function(item) for item in items]
    with ThreadPoolExecutor(max_workers=min(concurrency, len(items))) as pool:
        return list(pool.map(function, items))


def _optional_float(value, name: str) -> float | None:
    if value is None or (isinstance(value, str) and value.lower() in ("", "none", "null")):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"model arg {name}={value!r} is not a number") from None


class HttpChoiceModel(ChoiceModel):
    """Shared body of the HTTP adapters: keys, client, retries, concurrency, tokens, latency, cost.

    Subclasses set `name`, `provider` and `default_key_env`, and implement
    `endpoint()`, `auth_headers()`, `build_body(query)` and `parse_body(body)`.
    """

    provider = "api"
    default_key_env = ""
    default_audio_sr = 16_000

    def __init__(
        self,
        *,
        model: str,
        base_url: str,
        api_key_env: str | None = None,
        key_required: bool = True,
        concurrency: int = 4,
        max_attempts: int = 6,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        retry_after_max: float = 300.0,
        timeout: float = 180.0,
        temperature=0.0,
        max_tokens: int = 1024,
        send_seed: bool = True,
        price_in=None,
        price_out=None,
        audio_sr: int | None = None,
        text_only: bool = False,
        **unknown,
    ):
        if "max_new_tokens" in unknown:  # the runner's --max-new-tokens flag arrives under the HF name
            max_tokens = int(unknown.pop("max_new_tokens"))
        if "api_key" in unknown or "key" in unknown:
            raise ValueError(f"{self.name}: API keys are never passed as arguments; set {api_key_env or self.default_key_env} "
                             "in the environment (or api_key_env=NAME_OF_VARIABLE)")
        if unknown:
            raise ValueError(f"{self.name}: unknown model args {sorted(unknown)}")
        if int(concurrency) < 1 or int(max_attempts) < 1:
            raise ValueError(f"{self.name}: concurrency and max_attempts must be >= 1")
        self.model = str(model)
        self.base_url = str(base_url).rstrip("/")
        self.api_key_env = api_key_env or self.default_key_env
        self._api_key = read_api_key(self.api_key_env, required=key_required)
        self.concurrency = int(concurrency)
        self.policy = RetryPolicy(int(max_attempts), float(backoff_base), float(backoff_max), float(retry_after_max))
        self.timeout = float(timeout)
        self.temperature = _optional_float(temperature, "temperature")
        self.max_tokens = int(max_tokens)
        self.send_seed = bool(send_seed)
        self.price_in = _optional_float(price_in, "price_in")
        self.price_out = _optional_float(price_out, "price_out")
        self.audio_sr = int(audio_sr) if audio_sr else self.default_audio_sr
        self.text_only = bool(text_only)
        self.needs_text_parts = self.text_only
        self._client = None
        self.sleep: Callable[[float], None] = time.sleep  # tests may replace it

    # -- provider specifics -------------------------------------------------
    def endpoint(self) -> str:
        raise NotImplementedError

    def auth_headers(self) -> dict[str, str]:
        raise NotImplementedError

    def build_body(self, query: ChoiceQuery) -> dict:
        raise NotImplementedError

    def parse_body(self, body: dict) -> tuple[str, int | None, int | None]:
        """(generated text, input tokens, output tokens); raises ValueError on an unexpected shape."""
        raise NotImplementedError

    # -- shared machinery ---------------------------------------------------
    def describe(self) -> dict:
        return {
            "name": self.name,
            "label": f"{self.name}:{self.model}",
            "provider": self.provider,
            "model": self.model,
            "base_url": redact_url(self.base_url),
            "api_key_env": self.api_key_env,  # the variable's name, never its value
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "audio_sr": self.audio_sr,
            "text_only": self.text_only,
            "concurrency": self.concurrency,
            "max_attempts": self.policy.max_attempts,
            "price_in_per_1m": self.price_in,
            "price_out_per_1m": self.price_out,
        }

    def _http(self):
        if self._client is None:
            import httpx

            self._client = httpx.Client(timeout=self.timeout, limits=httpx.Limits(max_connections=self.concurrency))
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _check_parts(self, query: ChoiceQuery) -> None:
        if self.text_only and any(part.kind == "audio" for part in query.parts):
            raise ApiCallError(f"{self.name}: text_only backend got audio in query {query.uid} (use oracle mode or history=text)")

    def _answer(self, query: ChoiceQuery) -> ModelOutput:
        start = time.perf_counter()
        secrets = [self._api_key]
        try:
            self._check_parts(query)
            body, latency = post_json(self._http(), self.endpoint(), headers=self.auth_headers(), body=self.build_body(query),
                                      policy=self.policy, secrets=secrets, label=f"{self.name} {query.uid}", sleep=self.sleep)
            try:
                text, tokens_in, tokens_out = self.parse_body(body)
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise ApiCallError(scrub(f"{self.name} {query.uid}: malformed response body ({type(exc).__name__}: {exc}): "
                                         f"{str(body)[:200]}", secrets)) from None
        except ApiCallError as exc:
            return ModelOutput(error=str(exc), latency_s=time.perf_counter() - start)
        except Exception as exc:  # anything unexpected still must not kill the run, nor leak the key
            return ModelOutput(error=scrub(f"{self.name} {query.uid}: {type(exc).__name__}: {exc}", secrets),
                               latency_s=time.perf_counter() - start)
        return ModelOutput(text=text, input_tokens=tokens_in, output_tokens=tokens_out, latency_s=latency,
                           cost_usd=cost_usd(tokens_in, tokens_out, self.price_in, self.price_out))

    def generate(self, queries: list[ChoiceQuery]) -> list[ModelOutput]:
        outputs = map_in_order(self._answer, queries, self.concurrency)
        failed = sum(output.error is not None for output in outputs)
        if failed:
            logger.warning("%s: %d of %d queries failed (see their error fields)", self.name, failed, len(queries))
        return outputs


def finite_or_none(value) -> int | None:
    """A token count from a usage field (None when absent or not a number)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)) and math.isfinite(value):
        return int(value)
    return None
