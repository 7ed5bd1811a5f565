"""What a room is told when a run fails (issue 12 §8): the provider's sentence, with links, addresses, ids and
key-like strings taken out — and every word around them kept, so the asker still learns what went wrong."""

from __future__ import annotations

import time

import pytest

from engine.core.redact import MARK, MAX_CHARS, redact

M = MARK

CASES = [
    # Keys, masked or whole, by their well-known prefixes.
    ("Incorrect API key provided: sk-proj-abc12***************************xyz9. You can find your API key at "
     "https://platform.openai.com/account/api-keys.",
     f"Incorrect API key provided: {M}. You can find your API key at {M}."),
    ("invalid x-api-key sk-ant-api03-AbCdEf0123456789", f"invalid x-api-key {M}"),
    ("key sk_live_51HxYzAbCdEf was revoked", f"key {M} was revoked"),
    ("Authorization: Bearer abc123def456ghi789 was rejected", f"Authorization: {M} was rejected"),
    ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl expired", f"token {M} expired"),
    ("AWS key AKIAIOSFODNN7EXAMPLE is not allowed", f"AWS key {M} is not allowed"),
    # Whatever else looks random and secret-like.
    ("secret dGhpc2lzYXNlY3JldGtleTEyMzQ1Njc4OTA= leaked", f"secret {M} leaked"),
    # Organisation, project and request ids.
    ("Rate limit reached for gpt-4o-mini in organization org-AbCdEf123GhIjKl456 on tokens per min (TPM): "
     "Limit 200000, Used 199000, Requested 2000. Please try again in 1.2s.",
     f"Rate limit reached for gpt-4o-mini in organization {M} on tokens per min (TPM): "
     "Limit 200000, Used 199000, Requested 2000. Please try again in 1.2s."),
    ("project proj_8FhT2kQ9 is over quota (request_id: req_011CSHoEeqs5C35K2UUqR7Fy)",
     f"project {M} is over quota (request_id: {M})"),
    # Addresses: IPv4 and IPv6 with or without ports, host names, localhost, a bare name with a port, e-mail.
    ("Cannot connect to host 10.0.3.7:8000 ssl:default [Connect call failed ('10.0.3.7', 8000)]",
     f"Cannot connect to host {M} ssl:default [Connect call failed ('{M}', 8000)]"),
    ("connection to [fd00::1]:8443 refused; also tried ::1 and fe80::1%eth0",
     f"connection to {M} refused; also tried {M} and {M}"),
    ("HTTPConnectionPool(host='vllm.internal', port=8000): Max retries exceeded",
     f"HTTPConnectionPool(host='{M}', port=8000): Max retries exceeded"),
    ("upstream llm-gw.corp.example.com:8443 returned 502", f"upstream {M} returned 502"),
    ("vllm:8000 is unreachable from localhost:11434", f"{M} is unreachable from {M}"),
    ("write to ops@corp.example.com", f"write to {M}"),
    ("see postgres://summon:pw@db.internal:5432/summon", f"see {M}"),
    # What the asker needs stays: the provider's own words, model names, numbers, times, versions.
    ("Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or "
     "purchase credits.",
     "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or "
     "purchase credits."),
    ("The model `claude-3-5-haiku-20241022` does not exist or you do not have access to it.",
     "The model `claude-3-5-haiku-20241022` does not exist or you do not have access to it."),
    ("This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens.",
     "This model's maximum context length is 128000 tokens. However, your messages resulted in 130000 tokens."),
    ("retry at 12:30:45, e.g. after v1.2.3 of the user-facing project-specific client",
     "retry at 12:30:45, e.g. after v1.2.3 of the user-facing project-specific client"),
    ("gpt-4.1-mini and meta-llama/Llama-3.1-8B-Instruct are overloaded",
     "gpt-4.1-mini and meta-llama/Llama-3.1-8B-Instruct are overloaded"),
    ("", ""),
]


@pytest.mark.parametrize(("sentence", "said"), CASES, ids=[c[0][:40] or "empty" for c in CASES])
def test_redacted_where_it_is_said(sentence: str, said: str) -> None:
    assert redact(sentence) == said


def test_a_long_sentence_is_cut_and_says_so() -> None:
    said = redact("overloaded " * 1000)
    assert len(said) <= MAX_CHARS + 1 and said.endswith("…")


@pytest.mark.parametrize("piece", ["a", "1", "a1", ".", ":", "1.", "a.", "::", "[", "@a.", "sk-", "/", "=", "%"])
def test_pathological_input_is_handled_well_under_a_second(piece: str) -> None:
    """The patterns are linear; a provider's (or a proxy's) answer made of one repeated piece costs nothing."""
    sentence = piece * 100_000
    started = time.perf_counter()
    redact(sentence)
    assert time.perf_counter() - started < 1.0
