"""`vacuum URL --retention 7d`: delete the files no index references, once older than the retention.

The command line face of `streaming.vacuum` (`streaming.format.vacuum`): Delta VACUUM semantics, so a file
the index names is never deleted, nor one written more recently than the retention (a writer may still be
running). Retentions under 7 days are refused unless `--no-retention-check` says no writer can be running.
"""

from __future__ import annotations

import argparse
from typing import Any

from streaming.cli.console import OK, emit, human_bytes

EXAMPLES = """\
examples:
  mds-streaming vacuum s3://bucket/ds --dry-run                   # list what a 7-day vacuum would delete
  mds-streaming vacuum s3://bucket/ds --retention 14d
  mds-streaming vacuum /data/ds --retention 0 --no-retention-check   # no writer running: remove all leftovers
"""


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "vacuum",
        parents=[common],
        help="delete files no index references that are older than the retention",
        description=__doc__,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("url", help="dataset root, any URL")
    parser.add_argument("--retention", default="7d", help="minimum age of a deleted file: 7d (default), 24h, 30m, 0")
    parser.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    parser.add_argument(
        "--no-retention-check", action="store_true", help="allow a retention under 7 days (no writer is running)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from streaming.cli.console import UsageError
    from streaming.format.vacuum import DEFAULT_RETENTION, parse_retention, vacuum

    try:
        seconds = parse_retention(args.retention)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if seconds < DEFAULT_RETENTION and not args.no_retention_check:
        raise UsageError(
            f"--retention {args.retention} is shorter than 7 days: a writer still running could lose files it "
            f"has not published yet. If no writer can be running, add --no-retention-check."
        )
    from streaming.cli.console import dataset_folder, progress

    with progress(args, unit="files", desc="vacuum") as bar:
        result = vacuum(
            dataset_folder(args.url, "vacuum"),
            args.retention,
            dry_run=args.dry_run,
            retention_check=not args.no_retention_check,
            progress=bar.update,
        )
    verb = "would delete" if args.dry_run else "deleted"
    lines = [f"{result.root}: {verb} {len(result.deleted)} file(s), {human_bytes(result.deleted_bytes)}"]
    lines += [f"  {name}" for name in result.deleted]
    lines.append(
        f"kept {result.kept_referenced} referenced file(s) and {len(result.kept_recent)} unreferenced file(s) "
        f"newer than the retention"
    )
    emit(args, result.to_json(), "\n".join(lines))
    return OK
