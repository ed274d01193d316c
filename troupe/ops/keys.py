"""``troupe keys new`` and ``troupe keys convert``: API keys files that hold digests, never keys.

``new`` draws a random key, adds its digest with the principal's grants to the file (made 0600 if new)
and prints the key once: it is not kept anywhere else. ``convert`` rewrites a file of plain keys (the
old ``{"<key>": {"name", ...}}`` shape) as digests in place; the keys themselves keep working. See
``troupe.api.keys`` for the file's shape.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from troupe.api.keys import DIGEST, digest, digested, new_key, principal_of, read_file, write_file


def run_keys(args: Any, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    try:
        return _new(args, out) if args.keys_command == "new" else _convert(args, out)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"troupe keys {args.keys_command}: {exc}\n")
        return 1


def _new(args: Any, out: TextIO) -> int:
    data = read_file(args.file) if os.path.exists(args.file) else {"keys": []}
    if "keys" not in data or not isinstance(data["keys"], list):
        raise ValueError(f"{args.file} holds plain keys; run `troupe keys convert {args.file}` first")
    entry: dict[str, Any] = {"subject": args.subject}
    if args.issuer:
        entry["issuer"] = args.issuer
    if args.name:
        entry["name"] = args.name
    if args.admin:
        entry["admin"] = True
    else:
        entry["resources"] = args.resource or []
    if args.role:
        entry["roles"] = args.role
    principal_of("the new key", entry)  # refuse bad grants before a key is made
    key = new_key()
    data["keys"].append({DIGEST: digest(key), **entry})
    write_file(args.file, data)
    out.write(f"{key}\n")
    sys.stderr.write(f"troupe keys: added {args.subject!r} to {args.file}; the key above is not kept\n")
    return 0


def _convert(args: Any, out: TextIO) -> int:
    data = read_file(args.file)
    if "keys" in data:
        out.write(f"{args.file} already holds digests; nothing to do.\n")
        return 0
    converted = digested(data)
    write_file(args.file, converted)
    out.write(f"{args.file}: {len(converted['keys'])} key(s) now stored as SHA-256 digests.\n")
    return 0


def add_keys_command(commands: Any) -> None:
    keys = commands.add_parser("keys", help="make API keys, stored as digests in a keys file")
    what = keys.add_subparsers(dest="keys_command", metavar="WHAT", required=True)
    new = what.add_parser("new", help="make a key for one principal: prints it once, stores its digest")
    new.add_argument("--file", required=True, metavar="FILE", help="the keys file (created 0600 if missing)")
    new.add_argument("--subject", required=True, help="who the key stands for (stable id at its issuer)")
    new.add_argument("--issuer", help="the subject's issuer, e.g. your identity provider's (default: troupe)")
    new.add_argument("--name", help="the name people see (default: the subject)")
    new.add_argument("--resource", action="append", metavar="ID", help="a resource it may see (repeatable)")
    new.add_argument("--role", action="append", metavar="ROLE", help="a role, for approver policies")
    new.add_argument("--admin", action="store_true", help="may see and decide every run")
    convert = what.add_parser("convert", help="rewrite a file of plain keys as digests, in place")
    convert.add_argument("file", metavar="FILE")


__all__ = ["add_keys_command", "run_keys"]
