"""Secrets the process has read, and their removal from everything it writes.

Keys come only from the environment. Whatever reaches an output file, a log
line or an error message first passes `scrub`, which replaces the value of
every secret variable the process can see (`SECRET_ENV_VARS`, plus any other
variable an API client was pointed at) by `***`. A server that echoes our
`Authorization` header back therefore cannot get the key into `samples.jsonl`.
"""

from __future__ import annotations

import json
import logging
import os
import threading

REDACTED = "***"
# The variables whose values are secret wherever they appear.
SECRET_ENV_VARS: tuple[str, ...] = ("OPENAI_API_KEY", "GEMINI_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")
# Shorter values are not scrubbed: replacing every "x" of a file would destroy it, and no real key is this short.
MIN_SECRET_LENGTH = 8

_extra_vars: set[str] = set()
_lock = threading.Lock()


def register_secret_env(name: str) -> None:
    """Treat environment variable `name` as secret too (e.g. a key read through `api_key_env=`)."""
    with _lock:
        _extra_vars.add(name)


def known_secrets() -> list[str]:
    """Current values of every secret variable, longest first (so a key containing another is replaced whole)."""
    with _lock:
        names = set(SECRET_ENV_VARS) | _extra_vars
    values = {os.environ.get(name, "").strip() for name in names}
    return sorted((v for v in values if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True)


def scrub(text: str, extra: list[str | None] | None = None) -> str:
    """`text` with every known secret (and each of `extra`, whatever its length) replaced by ***."""
    secrets = sorted(set(known_secrets()) | {s for s in (extra or []) if s}, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
        # The same value as it appears inside a JSON string (a key with a quote or backslash).
        escaped = json.dumps(secret)[1:-1]
        if escaped != secret and escaped in text:
            text = text.replace(escaped, REDACTED)
    return text


def scrub_bytes(data: bytes) -> bytes:
    """UTF-8 bytes with every known secret replaced (what file writers call last)."""
    if not known_secrets():
        return data
    return scrub(data.decode("utf-8")).encode("utf-8")


class ScrubbingFilter(logging.Filter):
    """A handler filter that scrubs the formatted message (and drops the args it was built from)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if known_secrets():
            message = record.getMessage()
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            record.msg, record.args = scrub(message), None
            if record.exc_text:
                record.exc_text = scrub(record.exc_text)
        return True


def install_log_scrubber(logger: logging.Logger | None = None) -> None:
    """Put a ScrubbingFilter on every handler of `logger` (default: the root logger), once each."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, ScrubbingFilter) for f in handler.filters):
            handler.addFilter(ScrubbingFilter())
