"""Every public module, name, base class, member and parameter list of streaming-community 0.14.2 exists here.

`upstream-api.json` (a copy of the reference's surface, read from the installed package) lists, per module, each
name's kind (class, function, TypeVar, dict), a class's base class names, its ``__init__`` parameters (``null``:
the class defines none and inherits its base's), and its members: a parameter list for a method, ``"property"``,
or the type name of a class attribute. A parameter is written ``name``, ``name=<repr of default>``, ``kw:name``
(keyword-only), ``*:name`` (``*args``) or ``**:name`` (``**kwargs``).

Rules, as the compatibility contract states them: the same parameter names, order, kinds and defaults; a default
where upstream has none is allowed, and so are extra parameters that have defaults (after upstream's positional
ones, so positional calls keep their meaning). A base class may sit further up our MRO than upstream's.

Each module is one test case, so a failure lists every mismatch of that module at once.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import json
import typing
from functools import cached_property
from pathlib import Path
from typing import Any

import pytest

SPEC = json.loads((Path(__file__).parent / "upstream-api.json").read_text())["modules"]

# Names that helper "hfsftp" (issue 9, section 5: hf://, sftp://, alipan:// and the uploaders' bucket checks) delivers
# on its own branch; the lead empties this list after merging it. Each entry is `module.Name` or `module.Name.member`.
# Names still to be matched (each fails the surface check until it is); empty when everything matches.
EXPECTED_MISSING: set[str] = set()

# Differences kept on purpose, each with its reason; reported by the lead as documented decisions.
DELIBERATE: dict[str, str] = {
    # Upstream's LocalDataset derives from torch.utils.data.Dataset; ours reads shards without importing torch
    # (a DataLoader takes it as a map-style dataset all the same: it has __getitem__ and __len__).
    "streaming.base.LocalDataset": "does not derive from Dataset",
    "streaming.base.local.LocalDataset": "does not derive from Dataset",
    # Upstream's StreamingVisionDataset also derives from torchvision's VisionDataset (for its repr only); ours
    # does not, so it works without torchvision (whose PyPI wheel does not import beside a CPU-only torch build).
    "streaming.vision.base.StreamingVisionDataset": "does not derive from VisionDataset",
}

_KIND_PREFIX = {
    inspect.Parameter.KEYWORD_ONLY: "kw:",
    inspect.Parameter.VAR_POSITIONAL: "*:",
    inspect.Parameter.VAR_KEYWORD: "**:",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "",
    inspect.Parameter.POSITIONAL_ONLY: "",
}


def _parse(param: str) -> tuple[str, str, str | None]:
    """``"kw:level=3"`` -> ``("kw:", "level", "3")``: kind prefix, name, repr of the default (``None``: none)."""
    prefix = ""
    for candidate in ("**:", "*:", "kw:"):
        if param.startswith(candidate):
            prefix, param = candidate, param[len(candidate) :]
            break
    name, eq, default = param.partition("=")
    return prefix, name, default if eq else None


def _ours(signature: inspect.Signature) -> list[tuple[str, str, str | None, bool]]:
    """Our parameters as (kind prefix, name, repr of the default, has a default)."""
    out = []
    for p in signature.parameters.values():
        has_default = p.default is not inspect.Parameter.empty
        out.append((_KIND_PREFIX[p.kind], p.name, repr(p.default) if has_default else None, has_default))
    return out


def compare_params(expected: list[str], actual: Any) -> list[str]:
    """Return what differs between upstream's parameter list and the signature of ``actual``."""
    try:
        signature = inspect.signature(actual)
    except (TypeError, ValueError) as err:
        return [f"has no inspectable signature ({err})"]
    ours = _ours(signature)
    wanted = [_parse(p) for p in expected]
    problems = []
    by_name = {name: (i, prefix, default, has) for i, (prefix, name, default, has) in enumerate(ours)}
    positions = []
    for index, (prefix, name, default) in enumerate(wanted):
        if prefix in ("*:", "**:"):
            if not any(p == prefix for p, *_ in ours):
                problems.append(f"lacks {prefix[:-1]}{name}")
            continue
        found = by_name.get(name)
        if found is None:
            problems.append(f"lacks parameter {name!r}")
            continue
        position, our_prefix, our_default, _ = found
        positions.append(position)
        if our_prefix != prefix:
            problems.append(
                f"parameter {name!r} is {our_prefix or 'positional'} here, {prefix or 'positional'} upstream"
            )
        if prefix == "" and position != index:
            problems.append(f"parameter {name!r} is at position {position} here, {index} upstream")
        if default is not None and our_default != default:
            problems.append(f"parameter {name!r} defaults to {our_default} here, {default} upstream")
    if positions != sorted(positions):
        problems.append(f"parameter order differs: ours {[n for _, n, *_ in ours]}, upstream {expected}")
    wanted_names = {name for prefix, name, _ in wanted if prefix not in ("*:", "**:")}
    for prefix, name, _, has_default in ours:
        if name not in wanted_names and prefix not in ("*:", "**:") and not has_default:
            problems.append(f"extra parameter {name!r} has no default")
    if problems:
        problems.append(f"(ours: {signature}; upstream: ({', '.join(expected)}))")
    return problems


def _mro_names(cls: type) -> set[str]:
    names = {klass.__name__ for klass in inspect.getmro(cls)}
    if issubclass(cls, typing.Generic):  # typing.Generic is in the MRO as `Generic`
        names.add("Generic")
    return names


def _inherited_init(module: str, entry: dict[str, Any]) -> list[str] | None:
    """Upstream's ``__init__`` parameters for a class that defines none: those of its nearest listed base."""
    for base in entry.get("bases") or []:
        for names in SPEC.values():
            candidate = names.get(base)
            if candidate and candidate.get("kind") == "class" and "init" in candidate:
                if candidate["init"] is not None:
                    return candidate["init"]
                return _inherited_init(module, candidate)
    return None


def _check_member(cls: type, member: str, expected: Any) -> list[str]:
    try:
        static = inspect.getattr_static(cls, member)
    except AttributeError:
        return ["is missing"]
    if expected == "property":
        if isinstance(static, (property, cached_property)):
            return []
        return [f"is a {type(static).__name__} here, a property upstream"]
    if isinstance(expected, str):
        value = getattr(cls, member)
        if type(value).__name__ == expected or (isinstance(value, enum.Enum) and type(value).__name__ == expected):
            return []
        return [f"is a {type(value).__name__} here, a {expected} upstream"]
    value = getattr(cls, member)
    if not callable(value):
        return [f"is a {type(value).__name__} here, a method upstream"]
    return compare_params(expected, value)


def check_name(module: Any, module_name: str, name: str, entry: dict[str, Any]) -> dict[str, list[str]]:
    """Return ``{qualified name: problems}`` for one upstream name of one module."""
    qualified = f"{module_name}.{name}"
    try:
        value = getattr(module, name)
    except AttributeError:
        return {qualified: ["is missing"]}
    kind = entry["kind"]
    out: dict[str, list[str]] = {}
    if kind == "function":
        if not callable(value) or isinstance(value, type):
            return {qualified: [f"is a {type(value).__name__} here, a function upstream"]}
        out[qualified] = compare_params(entry["params"], value)
    elif kind == "TypeVar":
        out[qualified] = [] if isinstance(value, typing.TypeVar) else [f"is a {type(value).__name__}, not a TypeVar"]
    elif kind == "dict":
        out[qualified] = [] if isinstance(value, dict) else [f"is a {type(value).__name__}, not a dict"]
    elif kind == "class":
        if not isinstance(value, type):
            return {qualified: [f"is a {type(value).__name__} here, a class upstream"]}
        problems = [
            f"does not derive from {base}" for base in entry.get("bases") or [] if base not in _mro_names(value)
        ]
        if "init" in entry:
            init = entry["init"] if entry["init"] is not None else _inherited_init(module_name, entry)
            if init is not None:
                # The class's call signature (from __init__, or __new__ for a NamedTuple), without `self`.
                problems += [f"__init__: {p}" for p in compare_params(init[1:], value)]
        out[qualified] = problems
        for member, expected in (entry.get("members") or {}).items():
            out[f"{qualified}.{member}"] = _check_member(value, member, expected)
    else:
        out[qualified] = [f"unknown kind {kind!r} in upstream-api.json"]
    return out


def surface_problems(module_name: str) -> list[str]:
    """Every mismatch of one module, one line each, minus the expected-missing names."""
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # any import failure is the finding
        return [f"{module_name}: cannot be imported ({type(err).__name__}: {err})"]
    lines = []
    for name, entry in SPEC[module_name].items():
        for qualified, problems in check_name(module, module_name, name, entry).items():
            if qualified in EXPECTED_MISSING:
                continue
            lines.extend(f"{qualified}: {problem}" for problem in problems if DELIBERATE.get(qualified) != problem)
    return lines


@pytest.mark.parametrize("module_name", sorted(SPEC))
def test_module_matches_upstream(module_name: str) -> None:
    problems = surface_problems(module_name)
    assert not problems, "\n".join([f"{len(problems)} mismatches with streaming-community 0.14.2:", *problems])


def test_the_checker_finds_mismatches() -> None:
    """The comparison itself catches a renamed, a reordered, a re-kinded and a re-defaulted parameter."""

    def upstream_like(a, b=1, *, c=None): ...

    assert compare_params(["a", "b=1", "kw:c=None"], upstream_like) == []
    assert compare_params(["a", "b=1"], upstream_like) == []  # an extra keyword with a default is allowed

    def renamed(x, b=1, *, c=None): ...

    def reordered(b=1, a=None, *, c=None): ...

    def rekinded(a, *, b=1, c=None): ...

    def redefaulted(a, b=2, *, c=None): ...

    def extra_required(a, b=1, *, c=None, d): ...

    for wrong in (renamed, reordered, rekinded, redefaulted, extra_required):
        assert compare_params(["a", "b=1", "kw:c=None"], wrong), wrong.__name__


def test_expected_missing_entries_still_fail() -> None:
    """An expected-missing entry that now matches upstream must leave the list, so it cannot hide a regression."""
    matching = []
    for qualified in sorted(EXPECTED_MISSING):
        module_name = next(m for m in sorted(SPEC, key=len, reverse=True) if qualified.startswith(m + "."))
        name = qualified[len(module_name) + 1 :].partition(".")[0]
        found = check_name(importlib.import_module(module_name), module_name, name, SPEC[module_name][name])
        problems = found.get(qualified)
        if problems is None:  # a member of a class that is itself missing
            problems = found[f"{module_name}.{name}"]
        if not problems:
            matching.append(qualified)
    assert not matching, f"these now match upstream: remove them from EXPECTED_MISSING: {matching}"


def test_expected_missing_names_are_upstream_names() -> None:
    """The expected-missing list names only things upstream-api.json has (so it cannot hide a typo)."""
    known = set()
    for module_name, names in SPEC.items():
        for name, entry in names.items():
            known.add(f"{module_name}.{name}")
            known.update(f"{module_name}.{name}.{member}" for member in entry.get("members") or {})
    assert EXPECTED_MISSING <= known, sorted(EXPECTED_MISSING - known)
    assert set(DELIBERATE) <= known, sorted(set(DELIBERATE) - known)
