"""One benchmark phase in a fresh interpreter.

    python child.py PHASE --context JSON --args JSON --result FILE

The same file runs under the reference interpreter and under the project's, so phases use only the
public `streaming` API plus numpy/Pillow/torch where a scenario needs them. The phase's dict (or
`error` and `traceback` when it raised) goes to the result file as JSON, with the child's peak RSS.
Only the standard library is imported here, so the `import` phase measures a truly fresh import.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import resource
import sys
import threading
import traceback
from dataclasses import dataclass

# phase name -> "module:function"; every function takes (context, **args) and returns a dict.
PHASES = {
    "about": "phase_import:about",
    "probe": "phase_import:probe",
    "import": "phase_import:import_streaming",
    "import_api": "phase_import:import_api",
    "inputs": "phase_prep:make_inputs",
    "dataset": "phase_prep:write_dataset",
    "many_shards": "phase_prep:many_shards",
    "write": "phase_write:write",
    "local_seq": "phase_read:local_sequential",
    "local_random": "phase_read:local_random",
    "sd_random": "phase_read:streaming_random",
    "sd_iter": "phase_read:streaming_iteration",
    "dataloader": "phase_loader:dataloader",
    "resume_record": "phase_loader:resume_record",
    "resume": "phase_loader:resume",
    "startup": "phase_dataset:startup",
    "remote": "phase_dataset:remote_cold_warm",
    "spark": "phase_spark:spark_convert",
    "limit_iter": "phase_limits:limit_iter",
    "limit_random": "phase_limits:limit_random",
    "limit_zstd": "phase_limits:limit_zstd",
    "limit_write": "phase_limits:limit_write",
    "memory": "phase_memory:memory",
    "limit_memory": "phase_memory:limit_memory",
}
EXIT_GRACE_S = 20.0


@dataclass(frozen=True)
class Context:
    """Where a phase keeps its files, and which side (ref/ours) it is measuring."""

    scratch: str
    inputs: str
    side: str


def run_phase(phase: str, context: Context, args: dict) -> dict:
    """Run one phase; never raises: failures become `error`/`traceback` entries."""
    result: dict = {"phase": phase}
    try:
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}; valid phases: {', '.join(sorted(PHASES))}")
        module_name, function_name = PHASES[phase].split(":")
        function = getattr(importlib.import_module(module_name), function_name)
        result.update(function(context, **args))
    except Exception as exc:  # reported per side instead of crashing the run
        result["error"] = f"{type(exc).__name__}: {exc}"[:600]
        result["traceback"] = traceback.format_exc()[-3000:]
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def _write_result(path: str, result: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(result, f, default=str)
    os.replace(tmp, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("phase")
    parser.add_argument("--context", required=True, help="JSON object: scratch, inputs, side")
    parser.add_argument("--args", default="{}", help="JSON object of phase keyword arguments")
    parser.add_argument("--result", required=True, help="file that receives the JSON result")
    options = parser.parse_args()
    context = Context(**json.loads(options.context))
    _write_result(options.result, run_phase(options.phase, context, json.loads(options.args)))
    sys.stdout.flush()
    # Exit normally so the implementation's own cleanup runs, but never hang the harness on it.
    watchdog = threading.Timer(EXIT_GRACE_S, lambda: os._exit(3))
    watchdog.daemon = True
    watchdog.start()


if __name__ == "__main__":
    main()
