"""Small parsing and waiting helpers shared by writers and datasets (upstream's `streaming.base.util`)."""

from __future__ import annotations

import os
import re
import time

from streaming._extras import install_command

_BYTE_UNITS = {"b": 0, "kb": 1, "mb": 2, "gb": 3, "tb": 4, "pb": 5, "eb": 6, "zb": 7, "yb": 8}
_COUNT_UNITS = {"k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}
_NUMBER_WITH_SUFFIX = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([a-z]*)\s*$")


def bytes_to_int(bytes_str: int | float | str) -> int:
    """Parse a byte count such as ``"64mb"``, ``"1.5gb"``, ``"100b"`` or ``4096`` (units are powers of 1024)."""
    if isinstance(bytes_str, bool):
        raise ValueError(
            f"Unsupported value/suffix {bytes_str!r} (a byte size): expected an int or a string like '64mb'."
        )
    if isinstance(bytes_str, (int, float)):
        return int(bytes_str)
    match = _NUMBER_WITH_SUFFIX.match(str(bytes_str).lower())
    if match is None or match.group(2) not in _BYTE_UNITS and match.group(2) != "":
        raise ValueError(
            f"Unsupported value/suffix {bytes_str!r} (a byte size): expected a number with an optional unit, one of "
            f"{', '.join(_BYTE_UNITS)} (powers of 1024), e.g. '64mb'."
        )
    number, unit = match.groups()
    return int(float(number) * 1024 ** _BYTE_UNITS.get(unit, 0))


def number_abbrev_to_int(abbrev_str: int | float | str) -> int:
    """Parse a count such as ``"100k"``, ``"64M"``, ``"1.5b"`` or ``77`` (units are powers of 1000)."""
    if isinstance(abbrev_str, bool):
        raise ValueError(f"Unsupported value/suffix {abbrev_str!r} (a count): expected an int or a string like '100k'.")
    if isinstance(abbrev_str, (int, float)):
        return int(abbrev_str)
    match = _NUMBER_WITH_SUFFIX.match(str(abbrev_str).lower())
    if match is None or (match.group(2) and match.group(2) not in _COUNT_UNITS):
        raise ValueError(
            f"Unsupported value/suffix {abbrev_str!r} (a count): expected a number with an optional suffix, one of "
            f"k, m, b, t (powers of 1000), e.g. '100k'."
        )
    digits, unit = match.groups()
    return int(float(digits) * _COUNT_UNITS.get(unit, 1))


def get_list_arg(text: str) -> list[str]:
    """Split a comma-separated command-line value into a list; an empty string gives ``[]``."""
    return text.split(",") if text else []


def wait_for_file_to_exist(filename: str, poll_interval: float, timeout: float, err_msg: str) -> None:
    """Block until ``filename`` exists, polling every ``poll_interval`` seconds, else raise after ``timeout``."""
    start = time.monotonic()
    while True:
        time.sleep(poll_interval)
        if os.path.exists(filename):
            time.sleep(poll_interval)
            return
        elapsed = time.monotonic() - start
        if elapsed > timeout:
            raise RuntimeError(f"{err_msg}timeout < {elapsed:.3f} secs.")


def get_import_exception_message(package_name: str, extra_deps: str) -> str:
    """Say which extra to install when an optional dependency is missing."""
    return (
        f"mds-streaming was installed without {package_name} support. To use {package_name}-related "
        f"packages with mds-streaming, run `{install_command(extra_deps)}`."
    )
