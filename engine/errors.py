"""The one error tree. Everything summon raises is one of these; foreign exceptions are translated
once, at the adapter edge (``raise Ours(...) from exc``).

    SummonError
    ├── ConfigError          a bad or missing setting; start-up stops with its one line
    ├── ContentError         content did not compile (carries every CompileError)
    ├── StoreError           the database
    │   └── LeaseLost        a fenced write touched 0 rows: another worker holds the run now
    ├── ProviderError        a model call failed
    │   ├── ProviderFailure  the provider's own fault: try the next one
    │   └── RequestFault     the request's fault: fail the run, never fall back
    ├── ToolError            a tool failed; goes back to the model as a tool error
    └── MatrixError          the homeserver refused or could not be reached
"""

from __future__ import annotations


class SummonError(Exception):
    """Base of everything summon raises."""


class ConfigError(SummonError):
    """A bad or missing setting. Its message is one line naming the key."""


class ContentError(SummonError):
    def __init__(self, errors: list[str]) -> None:
        super().__init__(f"{len(errors)} content error(s)")
        self.errors = errors


class StoreError(SummonError):
    pass


class LeaseLost(StoreError):
    """A write fenced on ``lease_owner`` matched no row: stop working on this run at once."""

    def __init__(self, run_id: int, owner: str) -> None:
        super().__init__(f"run {run_id}: lease no longer held by {owner}")
        self.run_id = run_id


class ProviderError(SummonError):
    def __init__(self, message: str, *, provider: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status


class ProviderFailure(ProviderError):
    """The provider's own failure (no credit, bad key, rate limit, down): try the next provider."""


class RequestFault(ProviderError):
    """The request's fault (malformed, too long): would fail everywhere, so the run fails."""


class ToolError(SummonError):
    pass


class MatrixError(SummonError):
    def __init__(self, message: str, *, status: int | None = None, errcode: str | None = None,
                 retry_after_ms: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.errcode = errcode
        self.retry_after_ms = retry_after_ms

    @property
    def retryable(self) -> bool:
        return self.status is None or self.status == 429 or self.status >= 500
