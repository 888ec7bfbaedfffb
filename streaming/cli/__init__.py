"""The `mds-streaming` command line (also `python -m streaming`): one module per command.

Commands: `convert`, `incremental`, `inspect`, `verify`, `rebuild-index`, `merge-index`, `cp`/`sync`, `vacuum`,
`simulate`.
Each takes `--json` (a JSON document on stdout for scripts) and `--quiet` (no progress bars), and exits 0 when
all is well, 1 when it found problems or could not finish (the message says what to do), 2 on a usage error.
Only argparse and tqdm are imported to parse the arguments; each command imports what it needs when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from streaming._extras import explain_missing
from streaming._version import DISTRIBUTION_VERSION
from streaming.cli.console import PROBLEMS, USAGE, UsageError, error_line

COMMANDS = ("convert", "incremental", "inspect", "verify", "rebuild_index", "merge_index", "cp", "vacuum", "simulate")

EXAMPLES = """\
examples:
  mds-streaming convert data.parquet s3://bucket/ds --compression zstd
  mds-streaming incremental /data/users_delta s3://bucket/users --mode mirror --key id
  mds-streaming inspect s3://bucket/ds
  mds-streaming verify s3://bucket/ds --sample 20
  mds-streaming rebuild-index /data/ds
  mds-streaming merge-index /data/ds
  mds-streaming cp s3://bucket/ds gs://other/ds
  mds-streaming vacuum s3://bucket/ds --retention 7d --dry-run
  mds-streaming simulate s3://bucket/ds --nodes 2 --devices 8 --workers 8 --batch-size 32 --bandwidth 500mb

Run `mds-streaming COMMAND --help` for each command's options and examples.
"""


def build_parser() -> argparse.ArgumentParser:
    """The parser of every command."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="print one JSON document on stdout (for scripts)")
    common.add_argument("--quiet", "-q", action="store_true", help="no progress bars or remarks on stderr")
    common.add_argument("--debug", action="store_true", help="show the full traceback of an error")
    parser = argparse.ArgumentParser(
        prog="mds-streaming",
        description="Convert, inspect, check, repair, copy, clean up and plan MDS datasets on any store.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mds-streaming {DISTRIBUTION_VERSION}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        importlib.import_module(f"streaming.cli.{name}").add_parser(commands, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code (0 ok, 1 problems found or failure, 2 usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    try:
        return int(args.run(args))
    except UsageError as err:
        print(error_line(args.command, str(err)), file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - every failure ends in one line (or a scrubbed traceback)
        if args.debug:  # the whole traceback, every exception of its chain scrubbed of credentials
            import traceback

            from streaming.storage.secrets import scrub

            print(scrub("".join(traceback.format_exception(err))), end="", file=sys.stderr)
            return PROBLEMS
        if isinstance(err, ModuleNotFoundError) and (missing := explain_missing(err, "this command")):
            # An optional package is missing: the one sentence that names its extra is the whole answer.
            print(error_line(args.command, str(missing)), file=sys.stderr)
            return PROBLEMS
        print(error_line(args.command, f"{type(err).__name__}: {err}"), file=sys.stderr)
        print("(run again with --debug for the full traceback)", file=sys.stderr)
        return PROBLEMS
