"""Every figure the README quotes is one BENCHMARKS.md's summary table measured: the same number with the
same unit (a README rounded from a run nobody made, or left behind by a re-measured row, fails here)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUMBER = r"\d[\d,]*(?:\.\d+)?"
UNITS = {"×": "×", "min": "min", "minutes": "min", "m/s": "m/s", "k": "k", "M": "M", "°": "°", "s": "s",
         "µs": "µs", "ms": "ms", "%": "%"}
FIGURE = re.compile(rf"(?<![\w.=/+-])~?({NUMBER}(?:\s?[–/-]\s?{NUMBER})*)\s?"
                    r"(×|minutes|min|m/s|µs|ms|k|M|°|%|s)(?![\w/])")
"""A number, a range ``a–b`` or a list ``a / b / c`` with a unit, not inside a key=value, a path or an option's
argument."""


def figures(text: str) -> set[tuple[float, str]]:
    out = set()
    for match in FIGURE.finditer(text):
        unit = UNITS[match.group(2)]
        for value in re.split(r"\s?[–/-]\s?", match.group(1)):
            out.add((float(value.replace(",", "")), unit))
    return out


def summary_table() -> str:
    text = (ROOT / "BENCHMARKS.md").read_text()
    start = text.index("## Summary")
    return text[start:text.index("\n## ", start + 1)]


def test_the_figure_pattern_reads_numbers_with_units_only():
    text = ("PPO at 1.09–1.34× rsl_rl, walks in ~12.5 min at 0.49 m/s; 670k env-steps/s; 16.7° slopes; "
            "1.25 / 1.39 min; `--duration 20`, env.num_envs=1024, model_300.pt, 2 cores, v1.2")
    assert figures(text) == {(1.09, "×"), (1.34, "×"), (12.5, "min"), (0.49, "m/s"), (670.0, "k"), (16.7, "°"),
                             (1.25, "min"), (1.39, "min")}


def test_every_readme_figure_is_in_the_benchmarks_summary():
    readme = figures((ROOT / "README.md").read_text())
    measured = figures(summary_table())
    missing = sorted(f for f in readme if not any(abs(f[0] - m[0]) < 1e-9 and f[1] == m[1] for m in measured))
    assert len(readme) >= 10, readme  # the README does quote results
    assert not missing, (f"README figures not in BENCHMARKS.md's summary table (quote the measured value, "
                         f"or measure it): {missing}")
