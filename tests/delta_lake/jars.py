"""The Delta Lake jars a local Spark session loads, fetched from Maven Central with ``mvn`` and cached in .ci/.

One Delta release per Spark line, or per range of its patch releases where Delta needs a newer patch (the one
owner; docs/support-matrix.md states them):

* Spark 4.0 (pyspark 4.0.1, the Apache Spark of Databricks Runtime 17.3 LTS): Delta 4.1.0, whose Spark 4.0 build is
  published as ``delta-spark_4.0_2.13`` (Delta 4.1 names its artifacts after the Spark line they were built for);
* Spark 3.5.3 and later (pyspark 3.5.9, the newest 3.5 on PyPI, in the Spark 3.5 Delta lane): Delta 3.3.3, the
  newest Delta 3.x, built against Spark 3.5.3; it enables row tracking;
* Spark 3.5.0 to 3.5.2 (pyspark 3.5.0, the floor's; Databricks Runtime 14.3 and 15.4 LTS): Delta 3.1.0, the newest
  Delta 3.x that runs on Spark 3.5.0 (3.2.1 fails reading ``_metadata`` columns there with a ``NoSuchMethodError``;
  3.3 needs Spark 3.5.3). Delta 3.1 cannot enable row tracking.

The jars go into ``.ci/delta-jars/<delta version>/`` with a ``.fetched`` stamp; Maven's own download cache is kept
beside them (``.ci/m2``), never in the home directory, so a fresh clone fetches everything itself and a second run
fetches nothing. ``python tests/delta_lake/jars.py`` fetches the jars of the running pyspark (what the Makefile's
lanes call before their tests); the test fixtures call `delta_jars`, which fetches them when they are missing.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
JAR_ROOT = CHECKOUT / ".ci" / "delta-jars"
MAVEN_CACHE = CHECKOUT / ".ci" / "m2"
FETCH_TIMEOUT = 600.0


@dataclass(frozen=True)
class DeltaRelease:
    """The Delta Lake release a Spark line runs, as Maven coordinates."""

    spark_line: str
    delta_version: str
    spark_artifact: str

    @property
    def artifacts(self) -> tuple[str, ...]:
        """The jars to load: Delta's Spark connector and its storage layer (Spark itself provides the rest)."""
        return (
            f"io.delta:{self.spark_artifact}:{self.delta_version}",
            f"io.delta:delta-storage:{self.delta_version}",
        )


#: Per Spark line, its releases by the first pyspark patch each runs on, newest patch range first.
RELEASES = {
    "4.0": ((0, DeltaRelease("4.0", "4.1.0", "delta-spark_4.0_2.13")),),
    "3.5": (
        (3, DeltaRelease("3.5", "3.3.3", "delta-spark_2.12")),
        (0, DeltaRelease("3.5", "3.1.0", "delta-spark_2.12")),
    ),
}


def release_for(pyspark_version: str) -> DeltaRelease:
    """The pinned Delta release of ``pyspark_version``'s Spark line and patch; other lines are refused by name."""
    parts = pyspark_version.split(".")
    line = ".".join(parts[:2])
    if line not in RELEASES:
        raise RuntimeError(
            f"No Delta Lake release is pinned for pyspark {pyspark_version} (Spark {line}); the Delta lanes run "
            f"Spark {' and '.join(sorted(RELEASES))} (tests/delta_lake/jars.py). Use .venv-delta, .venv-delta35 or "
            ".venv-spark35."
        )
    digits = "".join(itertools.takewhile(str.isdigit, parts[2])) if len(parts) > 2 else ""
    patch = int(digits or 0)
    return next(release for first, release in RELEASES[line] if patch >= first)


def delta_jars(pyspark_version: str) -> list[str]:
    """The paths of the Delta jars for ``pyspark_version``, fetched with ``mvn`` first when not cached."""
    release = release_for(pyspark_version)
    folder = JAR_ROOT / release.delta_version
    stamp = folder / ".fetched"
    if not stamp.exists():
        _fetch(release, folder)
        stamp.write_text("\n".join(release.artifacts) + "\n")
    jars = sorted(str(path) for path in folder.glob("*.jar"))
    if len(jars) != len(release.artifacts):
        raise RuntimeError(f"{folder} holds {len(jars)} jars, not {len(release.artifacts)}: remove it and run again.")
    return jars


def _fetch(release: DeltaRelease, folder: Path) -> None:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise RuntimeError("Fetching the Delta Lake jars needs Maven (`apt-get install maven`): mvn is not on PATH.")
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for artifact in release.artifacts:
        argv = [
            mvn,
            "-q",
            "-B",
            f"-Dmaven.repo.local={MAVEN_CACHE}",
            "dependency:copy",
            f"-Dartifact={artifact}",
            f"-DoutputDirectory={folder}",
        ]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=FETCH_TIMEOUT, cwd=folder)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr)[-2000:]
            raise RuntimeError(f"mvn could not fetch {artifact} from Maven Central:\n{tail}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        version = sys.argv[1]
    else:
        import pyspark

        version = pyspark.__version__
    print(os.pathsep.join(delta_jars(version)))
