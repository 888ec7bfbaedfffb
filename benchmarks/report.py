"""Turn per-round child results into median figures per side, ours/ref ratios and a Markdown table.

A side's figure is the median over its successful rounds; a side with no successful round shows
"n/a (error ...)". Results whose `values_ok` is false are still counted but flagged WRONG.
Beside both sides stands the scenario's physical reference (same rounds) where it has one: each side's
share of it is physical/side for a latency and side/physical for a rate, so 1.00 means "at the limit".
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import asdict, dataclass, field

from scenarios import Metric, Scenario

SIDES = ("ref", "ours")
SAME_WITHIN = 0.03
ERROR_CHARS = 70


@dataclass
class Figure:
    """One metric for one side, over all rounds."""

    value: float | str | None = None
    rounds: int = 0
    rounds_ok: int = 0
    wrong_values: int = 0
    errors: list[str] = field(default_factory=list)
    skipped: str = ""

    def cell(self) -> str:
        if self.skipped:
            return f"skipped ({self.skipped})"
        if self.value is None:
            first = self.errors[0] if self.errors else "no value reported"
            return f"n/a (error {first[:ERROR_CHARS]})"
        text = format_number(self.value) if isinstance(self.value, float) else str(self.value)
        if self.rounds_ok < self.rounds:
            text += f" ({self.rounds_ok}/{self.rounds} rounds)"
        if self.wrong_values:
            text += " WRONG VALUES"
        return text


@dataclass
class Row:
    scenario: str
    metric: str
    goal: str
    ref: Figure
    ours: Figure
    physical: Figure | None = None
    physical_label: str = ""

    def share_of_physical(self, side: Figure) -> float | None:
        """How close a side comes to the physical figure: 1.0 at the limit, below 1 short of it."""
        if self.physical is None or self.goal == "info":
            return None
        values = (side.value, self.physical.value)
        if not all(isinstance(v, float) and v > 0 for v in values):
            return None
        mine, limit = values
        return mine / limit if self.goal == "higher" else limit / mine  # type: ignore[operator]

    @property
    def ratio(self) -> float | None:
        numeric = all(isinstance(f.value, float) for f in (self.ref, self.ours))
        if not numeric or self.ref.value == 0:
            return None
        return self.ours.value / self.ref.value

    def verdict(self) -> str:
        ratio = self.ratio
        if ratio is None or self.goal == "info" or ratio <= 0:
            return ""
        gain = ratio if self.goal == "higher" else 1 / ratio
        if abs(gain - 1) <= SAME_WITHIN:
            return "same"
        if gain > 1:
            return f"{format_ratio(gain)}x better"
        return f"{format_ratio(1 / gain)}x worse"

    def as_json(self) -> dict:
        return {
            "scenario": self.scenario,
            "metric": self.metric,
            "goal": self.goal,
            "ref": asdict(self.ref),
            "ours": asdict(self.ours),
            "physical": asdict(self.physical) if self.physical else None,
            "physical_label": self.physical_label,
            "ours_share_of_physical": self.share_of_physical(self.ours),
            "ref_share_of_physical": self.share_of_physical(self.ref),
            "ratio_ours_over_ref": self.ratio,
            "verdict": self.verdict(),
        }


def format_ratio(value: float) -> str:
    """Two decimals in the usual range, three significant digits outside it."""
    return f"{value:.2f}" if 0.01 <= value < 100 else f"{value:.3g}"


def format_number(value: float) -> str:
    """Three or four significant digits, thousands separated."""
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def figure(metric: Metric, results: list[dict]) -> Figure:
    """Median (numbers) or most common value (text) of a metric over one side's round results."""
    found = Figure(rounds=len(results))
    values = []
    for result in results:
        error = result.get("error")
        if error is None and metric.key not in result:
            error = f"result has no {metric.key!r}"
        if error is not None:
            found.errors.append(error)
            continue
        values.append(result[metric.key])
        found.wrong_values += result.get("values_ok") is False
    found.rounds_ok = len(values)
    if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        found.value = float(statistics.median(values))
    elif values:
        found.value = Counter(str(v) for v in values).most_common(1)[0][0]
    return found


def _physical_figure(metric: Metric, results: list[dict]) -> Figure | None:
    """The physical reference's figure for a metric, or None when it does not measure that metric."""
    if not any(metric.key in result or "error" in result for result in results):
        return None
    return figure(metric, results)


def summarize(scenario: Scenario, results: dict[str, list[dict]]) -> list[Row]:
    """One row per metric; results maps side name (ref, ours, physical) -> the measured result of each round."""
    return [
        Row(
            scenario.name,
            metric.label,
            metric.goal,
            figure(metric, results.get("ref", [])),
            figure(metric, results.get("ours", [])),
            _physical_figure(metric, results.get("physical", [])),
            scenario.physical_label,
        )
        for metric in scenario.metrics
    ]


def skipped(scenario: Scenario, reason: str) -> list[Row]:
    """A single row saying why a scenario did not run."""
    labels = ", ".join(m.label for m in scenario.metrics)
    return [Row(scenario.name, labels, "info", Figure(skipped=reason), Figure(skipped=reason))]


def _table_safe(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def render(rows: list[Row]) -> str:
    """A Markdown table of every row, then the distinct errors per scenario and side."""
    lines = [
        "| scenario | metric | ref | ours | physical | ours/physical | ref/physical | ours/ref | ours is |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    labels: dict[str, str] = {}
    for row in rows:
        ratio = "" if row.ratio is None else format_ratio(row.ratio)
        physical = row.physical.cell() if row.physical else ""
        shares = [row.share_of_physical(side) for side in (row.ours, row.ref)]
        cells = [
            row.scenario,
            row.metric,
            row.ref.cell(),
            row.ours.cell(),
            physical,
            *("" if share is None else format_ratio(share) for share in shares),
            ratio,
            row.verdict(),
        ]
        lines.append("| " + " | ".join(_table_safe(c) for c in cells) + " |")
        if row.physical and row.physical_label:
            labels.setdefault(row.physical_label, row.scenario)
    if labels:
        lines += [
            "",
            "physical = the bar each scenario is held to, measured on the same bytes in the same rounds; "
            "x/physical = physical/x for a latency, x/physical for a rate (1.00 = at the limit):",
            *(f"- {scenario} and alike: {label}" for label, scenario in labels.items()),
        ]
    notes = []
    for row in rows:
        for side in (*SIDES, "physical"):
            if side == "physical" and row.physical is None:
                continue
            for error in dict.fromkeys(getattr(row, side).errors):
                note = f"- {row.scenario} [{side}]: {error}"
                if note not in notes:
                    notes.append(note)
    if notes:
        lines += ["", "Errors:", *notes]
    return "\n".join(lines)
