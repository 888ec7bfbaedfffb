"""`retry`: call a function again after a failure, with exponential backoff and jitter (upstream semantics).

`num_attempts` counts every call, the first included. After failed attempt `i` (0-based) the optional
`clean_up_fn` runs, then the caller sleeps `initial_backoff * 2**i + uniform(0, max_jitter)` seconds.
The decorator works bare (`@retry`) or with arguments (`@retry(num_attempts=5)`).
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast, overload

from streaming.storage.secrets import scrub

logger = logging.getLogger(__name__)

TCallable = TypeVar("TCallable", bound=Callable[..., Any])


def backoff_delay(attempt: int, initial_backoff: float, max_jitter: float) -> float:
    """Seconds to wait after failed attempt `attempt` (0-based)."""
    return initial_backoff * 2**attempt + random.random() * max_jitter


@overload
def retry(exc_class: TCallable) -> TCallable: ...


@overload
def retry(
    exc_class: type[BaseException] | tuple[type[BaseException], ...] = Exception,
    clean_up_fn: Callable[[], Any] | None = None,
    num_attempts: int = 3,
    initial_backoff: float = 1.0,
    max_jitter: float = 0.5,
) -> Callable[[TCallable], TCallable]: ...


def retry(
    exc_class: Any = Exception,
    clean_up_fn: Callable[[], Any] | None = None,
    num_attempts: int = 3,
    initial_backoff: float = 1.0,
    max_jitter: float = 0.5,
) -> Any:
    """Retry the decorated function on `exc_class` up to `num_attempts` calls in total."""
    if callable(exc_class) and not (isinstance(exc_class, type) and issubclass(exc_class, BaseException)):
        return retry()(exc_class)  # used bare: @retry
    if num_attempts < 1:
        raise ValueError(f"num_attempts must be at least 1, got {num_attempts}.")

    def decorate(function: TCallable) -> TCallable:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for attempt in range(num_attempts):
                try:
                    return function(*args, **kwargs)
                except exc_class as exc:
                    if attempt + 1 == num_attempts:
                        raise
                    if clean_up_fn is not None:
                        clean_up_fn()
                    delay = backoff_delay(attempt, initial_backoff, max_jitter)
                    logger.debug(
                        "attempt %d/%d of %s failed (%s); retrying in %.2f s",
                        attempt + 1,
                        num_attempts,
                        getattr(function, "__qualname__", function),
                        type(exc).__name__,
                        delay,
                    )
                    time.sleep(delay)
            raise AssertionError("unreachable")

        # functools.wraps keeps the wrapped signature at run time; mypy types the wrapper as (*args, **kwargs).
        return cast(TCallable, wrapper)

    return decorate


T = TypeVar("T")


def call_with_retry(
    function: Callable[[], T],
    attempts: int,
    *,
    initial_backoff: float = 1.0,
    max_jitter: float = 0.5,
    permanent: tuple[type[BaseException], ...] = (),
    before_retry: Callable[[], Any] | None = None,
) -> T:
    """Call `function` up to `attempts` times in total, backing off as `retry` does.

    Exceptions of the `permanent` types are raised at once; `before_retry` runs before each new attempt.
    """
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, got {attempts}.")
    for attempt in range(attempts):
        try:
            return function()
        except permanent:
            raise
        except Exception as exc:
            if attempt + 1 == attempts:
                raise
            delay = backoff_delay(attempt, initial_backoff, max_jitter)
            logger.info(
                "attempt %d/%d failed (%s: %s); retrying in %.2f s",
                attempt + 1,
                attempts,
                type(exc).__name__,
                scrub(str(exc)),  # an endpoint URL in the error may carry a password
                delay,
            )
            if before_retry is not None:
                before_retry()
            time.sleep(delay)
    raise AssertionError("unreachable")
