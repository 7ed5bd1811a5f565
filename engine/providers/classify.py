"""Whose fault a failed model call was. Pure: a status, the error's type/code and its sentence in; a
verdict out. The adapters read those off their SDK's exception and raise what the verdict says.

The rule (SPEC §2): fall back only when the failure is the provider's own — it would not happen on
another provider. Never on a malformed request: that fails everywhere and is two bills.

    status                        verdict    why                       same-provider retry
    ----------------------------  ---------  ------------------------  -------------------
    none (connection, timeout)    provider   unreachable               no (next provider)
    400 "credit balance is too    provider   no_credit                 no
        low" / type billing_error
    400 context length            request    context_length            -
    400 anything else             request    malformed                 -
    401, 403                      provider   refused (key/permission)  no
    402                           provider   no_credit                 no
    404                           provider   model_not_found           no
    408                           provider   timeout                   no
    409                           provider   conflict                  no
    413                           request    too_large                 -
    422                           request    malformed                 -
    429 insufficient_quota        provider   no_credit                 no
    429                           provider   rate_limited              yes
    5xx, 529                      provider   server / overloaded       yes
    200 with an error body        provider   error_body                no
    any other 4xx                 provider   refused                   no

An unlisted 4xx (405, 410, 451 …) is a provider or a base url that refuses us, not a request that
would fail everywhere, so it falls back. A retry is one short one, honouring ``Retry-After``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Literal

from engine.errors import ProviderError, ProviderFailure, RequestFault, RetryableFailure

Fault = Literal["provider", "request"]

_CREDIT = re.compile(r"credit balance is too low|insufficient (credits|funds|balance)", re.IGNORECASE)
_CONTEXT = re.compile(
    r"context[ _-]?length|context window|maximum context|prompt is too long|too many (input )?tokens"
    r"|input is too long|reduce the length of the messages",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Verdict:
    fault: Fault
    reason: str
    retry: bool = False  # one short same-provider retry is worth it


def classify(
    status: int | None, *, error_type: str | None = None, code: str | None = None, message: str = "",
) -> Verdict:
    """``status`` None means no HTTP answer at all (refused, reset, timed out)."""
    kind = (error_type or "").lower()
    what = (code or "").lower()
    if status is None:
        return Verdict("provider", "unreachable")
    if status == 400:
        if kind == "billing_error" or _CREDIT.search(message):
            return Verdict("provider", "no_credit")
        if what == "context_length_exceeded" or _CONTEXT.search(message):
            return Verdict("request", "context_length")
        return Verdict("request", "malformed")
    if status == 413:
        return Verdict("request", "too_large")
    if status == 422:
        return Verdict("request", "malformed")
    if status in (401, 403):
        return Verdict("provider", "refused")
    if status == 402:
        return Verdict("provider", "no_credit")
    if status == 404:
        return Verdict("provider", "model_not_found")
    if status == 408:
        return Verdict("provider", "timeout")
    if status == 409:
        return Verdict("provider", "conflict")
    if status == 429:
        if "insufficient_quota" in (what, kind) or _CREDIT.search(message):
            return Verdict("provider", "no_credit")
        return Verdict("provider", "rate_limited", retry=True)
    if status == 529:
        return Verdict("provider", "overloaded", retry=True)
    if status >= 500:
        return Verdict("provider", "server", retry=True)
    if 200 <= status < 300:
        return Verdict("provider", "error_body")
    return Verdict("provider", "refused")


def retry_after(headers: Mapping[str, str], now: datetime) -> float | None:
    """Seconds the provider asked us to wait: ``retry-after-ms``, or ``retry-after`` as seconds or an
    HTTP date. None when it did not say (or said nonsense)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            return max(0.0, float(raw_ms) / 1000)
        except ValueError:
            pass
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, (when - now).total_seconds())


def error_fields(body: object) -> tuple[str | None, str | None, str | None]:
    """(type, code, message) out of an error body, OpenAI-shaped (``{"error": {...}}`` or the inner
    object the SDK already unwrapped) or Anthropic-shaped (``{"type": "error", "error": {...}}``)."""
    if not isinstance(body, Mapping):
        return None, None, (body.strip() or None) if isinstance(body, str) else None
    inner = body.get("error")
    if isinstance(inner, Mapping):
        body = inner
    elif isinstance(inner, str):
        return None, None, inner

    def text(key: str) -> str | None:
        value = body.get(key)
        return str(value) if value is not None and value != "" else None

    return text("type"), text("code"), text("message")


def wire_fault(
    provider: str, status: int, body: object, headers: Mapping[str, str], now: datetime,
) -> ProviderError:
    """The one mapping from an HTTP answer that was not an answer to our errors. The message is the
    provider's own sentence, pulled out of its JSON (it is what the asker is shown)."""
    error_type, code, message = error_fields(body)
    verdict = classify(status, error_type=error_type, code=code, message=message or "")
    sentence = message or f"the provider answered HTTP {status}"
    if verdict.fault == "request":
        return RequestFault(sentence, provider=provider, status=status, reason=verdict.reason)
    if verdict.retry:
        return RetryableFailure(sentence, provider=provider, status=status, retry_after=retry_after(headers, now),
                                reason=verdict.reason)
    return ProviderFailure(sentence, provider=provider, status=status, reason=verdict.reason)


def unreachable(provider: str, exc: BaseException, *, timed_out: bool) -> ProviderFailure:
    """No HTTP answer at all: refused, reset, unresolvable, or too slow."""
    if timed_out:
        return ProviderFailure("the provider did not answer in time", provider=provider, reason="timeout")
    cause = exc.__cause__ or exc.__context__
    detail = str(cause) if cause is not None and str(cause) else str(exc)
    return ProviderFailure(f"could not reach the provider ({detail})", provider=provider, reason="unreachable")
