"""What the HTTP API adapters share: one ChoiceModel body over speecheq_dataset.http_api.

A failed query never raises out of `generate`: after a bounded number of
attempts it becomes a ModelOutput with `error` set, and the run goes on
(the runner reports it). The API key is read from the environment only, sent
in a header, and scrubbed from every message this module produces (and, by the
run's writers, from everything written).
"""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Callable

from eval_scripts.models.base import ChoiceModel, ChoiceQuery, Clip, ModelOutput
from speecheq_dataset.audio import encode_wav
from speecheq_dataset.http_api import ApiCallError
from speecheq_dataset.http_api import RetryPolicy
from speecheq_dataset.http_api import map_in_order
from speecheq_dataset.http_api import post_json
from speecheq_dataset.http_api import read_api_key
from speecheq_dataset.http_api import redact_url
from speecheq_dataset.secrecy import scrub

logger = logging.getLogger(__name__)

def clip_to_base64_wav(clip: Clip, target_rate: int | None) -> str:
    """A clip as base64 WAV text, the form both APIs take inline."""
    return base64.b64encode(encode_wav(clip.array, clip.sampling_rate, target_rate)).decode("ascii")


def _optional_float(value, name: str) -> float | None:
    if value is None or (isinstance(value, str) and value.lower() in ("", "none", "null")):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"model arg {name}={value!r} is not a number") from None


class HttpChoiceModel(ChoiceModel):
    """Shared body of the HTTP adapters: keys, client, retries, concurrency, tokens, latency.

    `text_only=true` declares a text-only backend: the runner then requires
    `--oracle --history text` (protocol.plays_audio), so no query with a clip reaches it.

    Subclasses set `name`, `provider` and `default_key_env`, and implement
    `endpoint()`, `auth_headers()`, `build_body(query)` and `parse_body(body)`.
    """

    provider = "api"
    default_key_env = ""
    default_audio_sr = 16_000
    requires = ("httpx",)
    requires_extra = "api"
    extra_args = ("max_new_tokens",)  # the runner's --max-new-tokens, under its Hugging Face name

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
        audio_sr: int | None = None,
        text_only: bool = False,
        **unknown,
    ):
        if "max_new_tokens" in unknown:  # the runner's --max-new-tokens flag arrives under the HF name
            max_tokens = int(unknown.pop("max_new_tokens"))
        if "price_in" in unknown or "price_out" in unknown:
            raise ValueError(f"{self.name}: prices are run options, not model args: pass --price-in / --price-out")
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

    def _answer(self, query: ChoiceQuery) -> ModelOutput:
        start = time.perf_counter()
        secrets = [self._api_key]
        try:
            body, latency = post_json(self._http(), self.endpoint(), headers=self.auth_headers(), body=self.build_body(query),
                                      policy=self.policy, timeout_s=self.timeout, secrets=secrets, label=f"{self.name} {query.uid}", sleep=self.sleep)
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
        # A server may echo the request (headers included) back in its answer.
        return ModelOutput(text=scrub(text, secrets), input_tokens=tokens_in, output_tokens=tokens_out, latency_s=latency)

    def generate(self, queries: list[ChoiceQuery]) -> list[ModelOutput]:
        outputs = map_in_order(self._answer, queries, self.concurrency)
        failed = sum(output.error is not None for output in outputs)
        if failed:
            logger.warning("%s: %d of %d queries failed (see their error fields)", self.name, failed, len(queries))
        return outputs
