"""Whose fault a failed model call was, by a table of real cases: the provider's own (try the next
provider) or the request's (fail the run, never fall back)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engine.errors import ProviderFailure, RequestFault
from engine.providers.classify import (
    RetryableFailure,
    Verdict,
    classify,
    error_fields,
    retry_after,
    wire_fault,
)

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)

CREDIT = ("Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade "
          "or purchase credits.")

# (id, status, error type, code, message, verdict)
CASES: list[tuple[str, int | None, str | None, str | None, str, Verdict]] = [
    ("connection_or_timeout", None, None, None, "", Verdict("provider", "unreachable")),
    ("anthropic_400_credit_too_low", 400, "invalid_request_error", None, CREDIT, Verdict("provider", "no_credit")),
    ("400_billing_error_type", 400, "billing_error", None, "billing", Verdict("provider", "no_credit")),
    ("400_invalid_request", 400, "invalid_request_error", None, "messages.1: unexpected `tool_use_id`",
     Verdict("request", "malformed")),
    ("400_bad_tool_schema", 400, "invalid_request_error", "invalid_function_parameters",
     "Invalid schema for function 'lookup'", Verdict("request", "malformed")),
    ("400_content_policy", 400, "invalid_request_error", "content_policy_violation",
     "Your request was rejected as a result of our safety system.", Verdict("request", "malformed")),
    ("openai_400_context_length", 400, "invalid_request_error", "context_length_exceeded",
     "This model's maximum context length is 128000 tokens.", Verdict("request", "context_length")),
    ("anthropic_400_prompt_too_long", 400, "invalid_request_error", None,
     "prompt is too long: 210000 tokens > 200000 maximum", Verdict("request", "context_length")),
    ("401_bad_key", 401, "authentication_error", "invalid_api_key", "invalid x-api-key", Verdict("provider", "refused")),
    ("403_permission", 403, "permission_error", None, "not allowed in your region", Verdict("provider", "refused")),
    ("402_openrouter_no_credit", 402, None, "402", "Insufficient credits.", Verdict("provider", "no_credit")),
    ("404_model_not_found", 404, "invalid_request_error", "model_not_found", "The model `gpt-9` does not exist",
     Verdict("provider", "model_not_found")),
    ("404_anthropic_model", 404, "not_found_error", None, "model: claude-nope", Verdict("provider", "model_not_found")),
    ("408", 408, None, None, "Request timed out", Verdict("provider", "timeout")),
    ("409", 409, None, None, "conflict", Verdict("provider", "conflict")),
    ("413", 413, "request_too_large", None, "Request exceeds the maximum allowed number of bytes.",
     Verdict("request", "too_large")),
    ("422", 422, None, None, "field required", Verdict("request", "malformed")),
    ("429_insufficient_quota", 429, "insufficient_quota", "insufficient_quota", "You exceeded your current quota",
     Verdict("provider", "no_credit")),
    ("429_rate_limit", 429, "requests", "rate_limit_exceeded", "Rate limit reached",
     Verdict("provider", "rate_limited", retry=True)),
    ("429_anthropic_rate_limit", 429, "rate_limit_error", None, "exceed the rate limit",
     Verdict("provider", "rate_limited", retry=True)),
    ("500", 500, "api_error", None, "Internal server error", Verdict("provider", "server", retry=True)),
    ("502", 502, None, None, "Bad gateway", Verdict("provider", "server", retry=True)),
    ("503", 503, None, None, "Service unavailable", Verdict("provider", "server", retry=True)),
    ("504", 504, None, None, "Gateway timeout", Verdict("provider", "server", retry=True)),
    ("529_overloaded", 529, "overloaded_error", None, "Overloaded", Verdict("provider", "overloaded", retry=True)),
    ("200_error_body", 200, None, "502", "Provider returned error", Verdict("provider", "error_body")),
    ("405_other_4xx", 405, None, None, "Method not allowed", Verdict("provider", "refused")),
]


@pytest.mark.parametrize(("status", "error_type", "code", "message", "verdict"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_classify(status: int | None, error_type: str | None, code: str | None, message: str, verdict: Verdict) -> None:
    assert classify(status, error_type=error_type, code=code, message=message) == verdict


def test_no_request_fault_is_ever_retried() -> None:
    for _, status, error_type, code, message, _ in CASES:
        v = classify(status, error_type=error_type, code=code, message=message)
        assert not (v.fault == "request" and v.retry)


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({}, None),
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Thu, 01 Jan 2026 12:00:30 GMT"}, 30.0),
        ({"retry-after": "Thu, 01 Jan 2026 11:00:00 GMT"}, 0.0),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "soon"}, None),
    ],
    ids=["absent", "seconds", "fraction", "ms_wins", "http_date", "date_past", "negative", "nonsense"],
)
def test_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after(headers, NOW) == seconds


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({"message": "m", "type": "t", "code": "c", "param": None}, ("t", "c", "m")),  # the SDK unwrapped it
        ({"error": {"message": "m", "type": "t", "code": None}}, ("t", None, "m")),
        ({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
         ("overloaded_error", None, "Overloaded")),
        ({"error": {"code": 402, "message": "Insufficient credits"}}, (None, "402", "Insufficient credits")),
        ({"error": "just words"}, (None, None, "just words")),
        ("<html>502 Bad Gateway</html>", (None, None, "<html>502 Bad Gateway</html>")),
        (None, (None, None, None)),
    ],
    ids=["openai_unwrapped", "openai_wrapped", "anthropic", "openrouter_numeric_code", "string_error", "html", "none"],
)
def test_error_fields(body: object, fields: tuple[str | None, str | None, str | None]) -> None:
    assert error_fields(body) == fields


def test_wire_fault_raises_what_the_verdict_says_with_the_providers_sentence() -> None:
    credit = wire_fault("anthropic", 400, {"type": "error", "error": {"type": "invalid_request_error",
                                                                       "message": CREDIT}}, {}, NOW)
    assert type(credit) is ProviderFailure and str(credit) == CREDIT
    assert (credit.provider, credit.status) == ("anthropic", 400)

    fault = wire_fault("openai", 400, {"message": "bad tool schema", "type": "invalid_request_error"}, {}, NOW)
    assert type(fault) is RequestFault and str(fault) == "bad tool schema"

    limited = wire_fault("openai", 429, {"message": "slow down", "code": "rate_limit_exceeded"},
                         {"retry-after": "2"}, NOW)
    assert isinstance(limited, RetryableFailure) and limited.retry_after == 2.0

    quota = wire_fault("openai", 429, {"message": "quota", "code": "insufficient_quota"}, {"retry-after": "2"}, NOW)
    assert type(quota) is ProviderFailure  # no same-provider retry

    bare = wire_fault("x", 503, None, {}, NOW)
    assert isinstance(bare, RetryableFailure) and str(bare) == "the provider answered HTTP 503"
