"""The one error tree. Everything summon raises is one of these; foreign exceptions (asyncpg's, aiohttp's,
mautrix's, the SDKs') are translated once, at the adapter edge (``raise Ours(...) from exc``): the store
(``engine/store/``), the provider adapters, the tool clients and the surface adapters. A test walks every
exception class under ``engine/`` and ``appservice/`` and fails on one outside this tree.

    SummonError
    ├── ConfigError          a bad or missing setting; start-up stops with its one line
    ├── ContentError         content did not compile (carries every error as path:line: message)
    ├── ContentFault         one thing a content file says is wrong (also a ValueError, so the strict
    │                        models report it where it was written): an audience, a grammar, a refusal,
    │                        an unreadable file, an operation a model cannot be offered, a module that
    │                        does not load
    ├── StoreError           the database
    │   ├── StoreUnavailable it cannot be reached, went away, or asked for the whole transaction again
    │   │                    (a deadlock, a serialization failure): retry the whole thing
    │   ├── Conflict         a uniqueness rule refused a write: somebody else got there first
    │   ├── LeaseLost        a fenced write touched 0 rows: another worker holds the run now
    │   └── StoreRefused     the database refused a statement: a value it cannot store, a rule it keeps
    ├── ProviderError        a model call failed
    │   ├── ProviderFailure  the provider's own fault: try the next one
    │   │   ├── RetryableFailure  …and one short retry of the same provider is worth it
    │   │   └── CutOff       a streamed answer began and broke off: counted at what it said it used, else
    │   │                    at its worst case; never retried once a listener heard some of it
    │   ├── RequestFault     the request's fault: fail the run, never fall back
    │   └── NotAnAnswer      a 2xx body that carries an error, or no answer at all
    ├── ToolError            a tool failed in words the model can act on; goes back to it as the result
    │   └── SandboxUnavailable  a code tool cannot be jailed here (no bubblewrap, no network for it): it is
    │                        refused, never run unjailed
    ├── SpeechFailed         a speech endpoint (transcription, speech) failed, or was given what it cannot take
    ├── MemoryUnavailable    memories (person+recall) cannot be kept here: no pgvector, or no embedding model
    └── SurfaceError         a surface could not deliver or read; each surface defines its own under it, in its
                             own package (the engine names none of them):
          MatrixError        appservice/matrix/errors.py: the homeserver refused or could not be reached
            NotLeft          …: some of our users are still in a room they must leave
          RequestRefused     appservice/desk/errors.py: the desk refused what somebody asked (a status, words)
          GrantRefused       appservice/door/errors.py: a door grant that does not verify
          CharterError       appservice/members/errors.py: a member bot's charter could not be used (words the
                             builder can relay)
            CharterUnreadable  …: it does not unseal or no longer reads: fails closed for that charter alone
            CharterRefused   …: not theirs to change or remove, or made for somebody else
"""

from __future__ import annotations


class SummonError(Exception):
    """Base of everything summon raises."""


class ConfigError(SummonError):
    """A bad or missing setting. Its message is one line naming the key."""


class ContentError(SummonError):
    """Content did not compile: every error, each as ``path:line: message``."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__(f"{len(errors)} content error(s)")
        self.errors = errors


class ContentFault(SummonError, ValueError):
    """One thing a content file says is wrong, in words its author can act on. A ValueError too, so a
    validator raising it is reported by the strict models at the place it was written."""


class StoreError(SummonError):
    """The database, translated once at the store's edge."""


class StoreUnavailable(StoreError):
    """The database cannot be reached, went away mid-transaction, or asked for the whole transaction to be
    tried again (a deadlock, a serialization failure). Nothing of the transaction stands: retry all of it."""


class Conflict(StoreError):
    """A uniqueness rule refused a write: somebody else got there first."""


class LeaseLost(StoreError):
    """A write fenced on ``lease_owner`` matched no row: stop working on this run at once."""

    def __init__(self, run_id: int, owner: str) -> None:
        super().__init__(f"run {run_id}: lease no longer held by {owner}")
        self.run_id = run_id


class StoreRefused(StoreError):
    """The database refused a statement: a value it cannot store, or a rule it keeps."""


class ProviderError(SummonError):
    """``reason`` is the failure's class in ``engine/providers/classify.py`` (``no_credit``,
    ``rate_limited``, ``unreachable``, …): what /metrics counts fallbacks by."""

    def __init__(self, message: str, *, provider: str = "", status: int | None = None,
                 reason: str = "unknown") -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.reason = reason


class ProviderFailure(ProviderError):
    """The provider's own failure (no credit, bad key, rate limit, down): try the next provider."""


class CutOff(ProviderFailure):
    """A streamed answer that began and broke off (the provider's error mid-way, the connection gone, the stream
    ended early): it may have been billed. ``usage`` is what the provider said it used (a
    ``engine.providers.translate.Usage``; None when it said nothing, and the call is counted at its worst case)."""

    def __init__(self, message: str, *, provider: str = "", status: int | None = None, reason: str = "cut_off",
                 usage: object = None) -> None:
        super().__init__(message, provider=provider, status=status, reason=reason)
        self.usage = usage


class RetryableFailure(ProviderFailure):
    """A provider failure worth one short retry on the same provider (a rate limit, a server error);
    ``retry_after`` is what the provider asked for, in seconds (None: it did not say)."""

    def __init__(self, message: str, *, provider: str = "", status: int | None = None,
                 retry_after: float | None = None, reason: str = "unknown") -> None:
        super().__init__(message, provider=provider, status=status, reason=reason)
        self.retry_after = retry_after


class RequestFault(ProviderError):
    """The request's fault (malformed, too long): would fail everywhere, so the run fails."""


class NotAnAnswer(ProviderError):
    """A successful status whose body is an error, or carries no answer: the adapter maps it like an
    error status (``code`` is the body's error type or code, when it said one)."""

    def __init__(self, message: str, *, code: object = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class SpeechFailed(SummonError):
    """A speech endpoint failed (down, refused, an answer that is not one), or the audio is not what it takes
    (too large, too long, not audio). ``why`` is a short key: ``too_large``, ``too_long``, ``not_audio``,
    ``download``, or for a call, what was paid — ``endpoint`` (it answered with an error), ``unreached``
    (nothing was sent), ``unknown`` (sent, and no answer came back)."""

    def __init__(self, message: str, *, why: str = "endpoint") -> None:
        super().__init__(message)
        self.why = why


class MemoryUnavailable(SummonError):
    """Memories (``person+recall``) cannot be kept here: the database has no pgvector, or the embedding model's
    package is not installed. Its message is one line saying which."""


class ToolError(SummonError):
    """A tool's failure in words the model can act on (a bad argument, an API's 404, a denied URL). The
    worker hands the message back as the tool's result, marked as an error."""


class SandboxUnavailable(ToolError):
    """A code tool cannot be jailed on this machine (bubblewrap or what it needs is missing, or the jail could
    not be made): the tool is refused — never run without its jail — and the reason logged for the operator."""


class SurfaceError(SummonError):
    """A surface could not deliver or read."""


