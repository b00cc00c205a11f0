"""Keeping secrets out of reprs, logs, metrics and pages.

Two mechanisms, because secrets leak two ways:
- by key: any config key that names a secret (``sasl.password``, ``ssl.key.password``, ``*secret*``,
  ``*token*``) is shown as ``***`` wherever a config is printed;
- by value: every secret value loaded from a config is registered, and a logging filter replaces it
  wherever it appears in a log message (an error string from a library can quote it).
"""

from __future__ import annotations

import logging
import re
import threading

SECRET_KEY_RE = re.compile(r"(password|secret|token|credential|ssl\.key\.pem|oauthbearer\.config)", re.I)
MASK = "***"

_known_secrets: set[str] = set()
_lock = threading.Lock()


def is_secret_key(key: str) -> bool:
    return bool(SECRET_KEY_RE.search(key))


def register_secret(value: object) -> None:
    text = str(value)
    if len(text) >= 3:  # masking one- or two-character strings would garble every log line
        with _lock:
            _known_secrets.add(text)


def redact_text(text: str) -> str:
    with _lock:
        secrets = sorted(_known_secrets, key=len, reverse=True)
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


class RedactingFilter(logging.Filter):
    """Rewrites every record's final message with the known secrets masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact_text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def install_log_redaction(logger: logging.Logger | None = None) -> None:
    target = logger or logging.getLogger()
    if not any(isinstance(f, RedactingFilter) for f in target.filters):
        target.addFilter(RedactingFilter())
    for handler in target.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
