"""When to replay a failed source message, and when to give up on it."""

from __future__ import annotations

from dataclasses import dataclass

from squall.core.errors import ConfigError, UsageError


@dataclass(frozen=True, slots=True)
class RetrySchedule:
    """Exponential backoff: ``initial * multiplier**(n-1)`` before retry n, capped.

    Storm's ``KafkaSpoutRetryExponentialBackoff`` retries forever by default,
    which is how one poison record stalls a partition; here ``max_retries`` is
    finite by default and the message goes to the dead-letter topic after it.
    ``max_retries=None`` retries forever (opt in).
    """

    initial_delay_ms: int = 100
    multiplier: float = 2.0
    max_delay_ms: int = 10_000
    max_retries: int | None = 5

    def __post_init__(self) -> None:
        if self.initial_delay_ms < 0:
            raise ConfigError(f"retry initial_delay_ms must be >= 0, got {self.initial_delay_ms}")
        if self.multiplier < 1.0:
            raise ConfigError(f"retry multiplier must be >= 1, got {self.multiplier}")
        if self.max_delay_ms < self.initial_delay_ms:
            raise ConfigError(
                f"retry max_delay_ms ({self.max_delay_ms}) is below initial_delay_ms "
                f"({self.initial_delay_ms})"
            )
        if self.max_retries is not None and self.max_retries < 0:
            raise ConfigError(f"retry max_retries must be >= 0 or None, got {self.max_retries}")

    def delay_ms(self, retry: int) -> int:
        """Delay before retry number ``retry`` (1 = the first replay)."""
        if retry < 1:
            raise UsageError(f"retry numbers start at 1, got {retry}")
        # Cap the exponent so huge retry counts cannot overflow a float.
        d = self.initial_delay_ms * self.multiplier ** min(retry - 1, 64)
        return int(min(d, self.max_delay_ms))

    def exhausted(self, failures: int) -> bool:
        """True once ``failures`` deliveries failed and no retry is left."""
        return self.max_retries is not None and failures > self.max_retries
