"""The ``troupe`` command. Thin: it parses arguments and hands over to the module that does the work.

troupe demo [--store PATH] [--executor ray|local]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    from troupe.demo import DEFAULT_STORE

    parser = argparse.ArgumentParser(prog="troupe", description="Troupe: human-in-the-loop agents on Ray.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    demo = commands.add_parser(
        "demo",
        help="run an agent whose tools need your approval and your answers, in this terminal",
        description="Run the records-assistant agent: approve or decline a record deletion, answer the "
        "booking tool's question. Uses OpenAI when OPENAI_API_KEY is set (model OPENAI_MODEL, default "
        "gpt-4o-mini), a scripted model otherwise. A run left paused is resumed by the next "
        "`troupe demo` on the same store.",
    )
    demo.add_argument(
        "--store",
        default=DEFAULT_STORE,
        metavar="PATH",
        help=f"SQLite file for run state and the demo's records (default: ./{DEFAULT_STORE})",
    )
    demo.add_argument(
        "--executor",
        choices=("ray", "local"),
        default="ray",
        help="run the agent in a Ray actor (default; starts Ray locally) or in this process",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "demo":
        from troupe.demo import run

        return run(args.store, args.executor)
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())
