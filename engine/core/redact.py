"""A provider's sentence, fit to be said in a room (SPEC §1 "Endings"). Pure.

When a run fails, whoever asked hears why: the provider's own sentence. That sentence is written for the
operator and can carry what a room must not read — an internal gateway's address, an IP, an
organisation's or project's id, a fragment of a key ("Incorrect API key provided: sk-proj-…"). The
sentence is kept whole on the run (``summon runs`` shows it); what is *said* goes through ``redact``
first, which keeps the words and puts ``MARK`` where a link, an address, an id or a key was.

Every pattern is linear (no nested quantifiers, no backtracking across a run of the same character), and
the text is capped before it is read, so a provider's pathological answer costs nothing.
"""

from __future__ import annotations

import ipaddress
import re

# What stands where something was taken out: no language, so no strings file is needed for it.
MARK = "[…]"
# A provider's sentence is a sentence; past this it is cut (the whole stays on the run).
MAX_CHARS = 2000

# A link of any scheme (https://…, postgres://…): up to whitespace or a bracket/quote that closes it.
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s<>\"'`()\[\]{}]+")
_EMAIL = re.compile(r"\b[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63})+\b")
# Bearer and Basic credentials, and JWTs (three base64url parts, the first a JSON header: "eyJ…").
_BEARER = re.compile(r"\b(?:Bearer|Basic)\s+([A-Za-z0-9._~+/=\-]{8,})", re.IGNORECASE)
_JWT = re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*")
# Keys by their well-known prefixes (OpenAI and OpenRouter sk-…, Anthropic sk-ant-…, Slack xox…, GitHub
# gh…_, AWS AKIA…, Google AIza…), masked or not ("sk-abc1****wxyz").
_KEY = re.compile(
    r"\b(?:sk|pk|rk)-[A-Za-z0-9_*.\-]{6,}"
    r"|\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{6,}"
    r"|\bxox[abposr]-[A-Za-z0-9\-]{6,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{10,}"
    r"|\bAKIA[0-9A-Z]{12,}"
    r"|\bAIza[0-9A-Za-z_\-]{20,}"
)
# Organisation, project, user, account, request and key ids as providers write them (org-…, proj_…); the
# part after the prefix must look like an id (a digit in it, or long), so "user-facing" stays prose.
_ID = re.compile(r"\b(?:org|proj|project|user|acct|account|req|request|key|sess|ws|team)[-_]([A-Za-z0-9]{6,})\b",
                 re.IGNORECASE)
# Whatever else looks like a secret: a long run of letters and digits (base64 too) mixing both. Model
# names ("gpt-4o-mini-2024-07-18", "claude-3-5-haiku-20241022") are short runs joined by '-', so they stay.
_RANDOM = re.compile(r"(?<![A-Za-z0-9+=_])[A-Za-z0-9+_]{20,}={0,2}(?![A-Za-z0-9+=_])")
_IPV4 = re.compile(r"(?<![0-9.])(?:[0-9]{1,3}\.){3}[0-9]{1,3}(?![0-9]|\.[0-9])(?::[0-9]{1,5})?")
# An IPv6 address (checked by ``ipaddress``, so "12:30:45" stays), bracketed with a port or bare.
_IPV6 = re.compile(r"\[[0-9A-Fa-f:.%A-Za-z]{2,60}\](?::[0-9]{1,5})?|(?<![0-9A-Za-z:])[0-9A-Fa-f]{0,4}(?::[0-9A-Fa-f]{0,4}){2,8}(?:%[A-Za-z0-9]{1,16})?(?![0-9A-Za-z:])")
# A host name (two or more labels, the last one letters: "vllm.internal", "gw.corp.example.com") with an
# optional port; "localhost"; and a bare name with a port ("vllm:8000").
_HOST = re.compile(
    r"(?<![A-Za-z0-9_.\-@])(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.){1,10}[A-Za-z]{2,24}"
    r"(?::[0-9]{1,5})?(?![A-Za-z0-9_\-]|\.[A-Za-z0-9])"
    r"|\blocalhost(?::[0-9]{1,5})?\b"
    r"|\b[a-z][a-z0-9\-]{0,62}:[0-9]{2,5}\b"
)
# Words with a dot in them that are prose, not hosts.
_NOT_HOSTS = frozenset({"e.g", "i.e", "etc", "vs"})
# Punctuation that ends a sentence rather than a link.
_TRAILING = ".,;:!?"


def redact(sentence: str) -> str:
    """``sentence`` with every link, e-mail address, IP address, host name, key and key-like string, and
    organisation/project/request id replaced by ``MARK``; the words around them are kept."""
    text = sentence[:MAX_CHARS]
    text = _URL.sub(_link, text)
    text = _EMAIL.sub(MARK, text)
    text = _BEARER.sub(_idlike, text)
    text = _JWT.sub(MARK, text)
    text = _KEY.sub(_link, text)
    text = _ID.sub(_idlike, text)
    text = _IPV4.sub(_ipv4, text)
    text = _IPV6.sub(_ipv6, text)
    text = _HOST.sub(_host, text)
    text = _RANDOM.sub(_random, text)
    return _collapse(text) + ("…" if len(sentence) > MAX_CHARS else "")


def _link(match: re.Match[str]) -> str:
    """A link (or a key) goes; a full stop or comma that ended the sentence after it stays."""
    found = match.group(0)
    kept = found.rstrip(_TRAILING)
    return MARK + found[len(kept):]


def _idlike(match: re.Match[str]) -> str:
    """An id or a credential after its prefix: a digit in it, or too long to be a word."""
    body = match.group(1)
    return MARK if any(c.isdigit() for c in body) or len(body) >= 16 else match.group(0)


def _ipv4(match: re.Match[str]) -> str:
    address = match.group(0).split(":")[0]
    try:
        ipaddress.IPv4Address(address)
    except ValueError:
        return match.group(0)  # "999.1.2.3" is no address; a version number like it is left alone
    return MARK


def _ipv6(match: re.Match[str]) -> str:
    found = match.group(0)
    address = found
    if found.startswith("["):
        address = found[1:found.index("]")]
    address = address.split("%")[0]
    if address.count(":") < 2:
        return found
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return found  # a time of day ("12:30:45") or a ratio is not an address
    return MARK


def _host(match: re.Match[str]) -> str:
    found = match.group(0)
    if found.lower() in _NOT_HOSTS:
        return found
    return MARK


def _random(match: re.Match[str]) -> str:
    found = match.group(0)
    has_digit = any(c.isdigit() for c in found)
    has_letter = any(c.isalpha() for c in found)
    return MARK if has_digit and has_letter else found


def _collapse(text: str) -> str:
    """Two marks side by side (a host that was also matched as an id) read as one."""
    while f"{MARK}{MARK}" in text:
        text = text.replace(f"{MARK}{MARK}", MARK)
    return text
