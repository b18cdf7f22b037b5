"""Calling HTTP JSON APIs: keys from the environment, bounded retries with backoff, a deadline per attempt, ordered concurrency, cost.

Shared by the builders (LLM and TTS backends of the generation pipeline) and
the runner (API model adapters), so both retry, time out and keep keys out of
their outputs the same way. `httpx` is imported on first use (the `api` extra).
"""

from __future__ import annotations

import email.utils
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from .secrecy import register_secret_env
from .secrecy import scrub

logger = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 425, 429})  # plus every 5xx


class ApiCallError(Exception):
    """A request that failed for good (after retries, or at once for a non-retryable answer); message already scrubbed."""


class AttemptDeadlineError(Exception):
    """One attempt ran past its deadline (a server that answers too slowly, e.g. one byte at a time)."""


def read_api_key(env_var: str, *, required: bool) -> str | None:
    """The key from environment variable `env_var`; a missing required key names the variable, never a value."""
    register_secret_env(env_var)  # whatever it holds is scrubbed from every output from now on
    key = os.environ.get(env_var, "").strip()
    if not key and required:
        raise ValueError(f"no API key: set the environment variable {env_var} (keys are read from the environment only)")
    return key or None


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


def is_retryable_status(status: int) -> bool:
    """True for statuses worth another attempt: 408, 409, 425, 429 and every 5xx."""
    return status in RETRYABLE_STATUS or 500 <= status <= 599


@dataclass(frozen=True)
class HttpReply:
    """Status, headers and whole body of one attempt."""

    status: int
    headers: dict[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


def _send(client, method: str, url: str, headers: dict[str, str], body: dict | None, deadline: float) -> HttpReply:
    """One request, read in chunks so that a body trickling in past the deadline is cut off."""
    import httpx

    remaining = max(0.001, deadline - time.monotonic())
    with client.stream(method, url, headers=headers, json=body, timeout=httpx.Timeout(remaining)) as response:
        chunks = []
        for chunk in response.iter_bytes():
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise AttemptDeadlineError("the body was still arriving at the deadline")
        return HttpReply(response.status_code, {k.lower(): v for k, v in response.headers.items()}, b"".join(chunks))


def request_with_deadline(client, method: str, url: str, *, headers: dict[str, str], body: dict | None, timeout_s: float) -> HttpReply:
    """One attempt that returns or raises within `timeout_s` seconds in total (connect, send, wait and read together).

    httpx's own timeout bounds each read, not the attempt, so the request runs in a
    helper thread that the caller stops waiting for at the deadline; the helper then
    gives up by itself at its next chunk.
    """
    deadline = time.monotonic() + timeout_s
    outcome: dict = {}
    done = threading.Event()

    def attempt() -> None:
        try:
            outcome["reply"] = _send(client, method, url, headers, body, deadline)
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=attempt, name="speecheq-http-attempt", daemon=True).start()
    if not done.wait(timeout_s + 0.05):
        raise AttemptDeadlineError(f"no complete answer within {timeout_s:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["reply"]


def post_with_retries(
    client,
    url: str,
    *,
    headers: dict[str, str],
    body: dict,
    policy: RetryPolicy,
    timeout_s: float,
    secrets: list[str | None] = (),
    label: str,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[HttpReply, float]:
    """POST `body` as JSON until a 200 answer; returns (that reply, latency of the successful attempt in s).

    Each attempt has a deadline of `timeout_s`. Retries connection errors, timeouts,
    408/409/425/429 and 5xx; other statuses fail at once. Raises ApiCallError with a
    scrubbed message.
    """
    import httpx

    secrets = list(secrets)
    last_problem = ""
    for attempt in range(1, policy.max_attempts + 1):
        retry_after = None
        start = time.perf_counter()
        try:
            reply = request_with_deadline(client, "POST", url, headers=headers, body=body, timeout_s=timeout_s)
        except (httpx.TransportError, AttemptDeadlineError) as exc:  # refused/reset connections, timeouts, protocol errors
            last_problem = f"{type(exc).__name__}: {exc}"
        else:
            if reply.status == 200:
                return reply, time.perf_counter() - start
            last_problem = f"HTTP {reply.status}: {reply.text[:300]}"
            if not is_retryable_status(reply.status):
                raise ApiCallError(scrub(f"{label}: {last_problem}", secrets))
            retry_after = parse_retry_after(reply.headers.get("retry-after"))
        if attempt < policy.max_attempts:
            wait = policy.delay(attempt, retry_after)
            logger.info("%s: attempt %d/%d failed (%s); retrying in %.2f s", label, attempt, policy.max_attempts,
                        scrub(last_problem, secrets)[:120], wait)
            sleep(wait)
    raise ApiCallError(scrub(f"{label}: gave up after {policy.max_attempts} attempts; last error: {last_problem}", secrets))


def post_json(client, url: str, *, secrets: list[str | None] = (), label: str, **kwargs) -> tuple[dict, float]:
    """`post_with_retries` for an API that answers a JSON object: returns (the decoded object, latency in s).

    A 200 answer that is not a JSON object fails at once (ApiCallError).
    """
    reply, latency = post_with_retries(client, url, secrets=secrets, label=label, **kwargs)
    return _json_object(reply, label, list(secrets)), latency


def _json_object(reply: HttpReply, label: str, secrets: list[str | None]) -> dict:
    import json

    try:
        decoded = json.loads(reply.content)
    except (ValueError, RecursionError):
        raise ApiCallError(scrub(f"{label}: malformed response body (not JSON): {reply.text[:200]!r}", secrets)) from None
    if not isinstance(decoded, dict):
        raise ApiCallError(scrub(f"{label}: malformed response body (not a JSON object): {reply.text[:200]!r}", secrets))
    return decoded


def cost_usd(input_tokens: int | None, output_tokens: int | None, price_in: float | None, price_out: float | None) -> float | None:
    """Cost of one call from token counts and prices in USD per 1M tokens; None when either is unknown."""
    if price_in is None and price_out is None:
        return None
    if input_tokens is None or output_tokens is None:
        return None
    return (input_tokens * (price_in or 0.0) + output_tokens * (price_out or 0.0)) / 1_000_000


def map_in_order(function: Callable, items: list, concurrency: int, *, progress: str | None = None) -> list:
    """function(item) for every item, at most `concurrency` at a time; results in input order.

    `progress` names a tqdm bar counting finished items (None: no bar).
    """
    from tqdm.auto import tqdm

    with tqdm(total=len(items), desc=progress, disable=progress is None, dynamic_ncols=True) as bar:
        if concurrency <= 1 or len(items) <= 1:
            results = []
            for item in items:
                results.append(function(item))
                bar.update(1)
            return results
        with ThreadPoolExecutor(max_workers=min(concurrency, len(items))) as pool:
            futures = [pool.submit(function, item) for item in items]
            for future in futures:
                future.add_done_callback(lambda _: bar.update(1))
            return [future.result() for future in futures]
