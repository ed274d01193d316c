"""The ``troupe`` command. Thin: it parses arguments and hands over to the module that does the work.

troupe --version
troupe demo [--store PATH] [--executor ray|local]
troupe serve (--app MODULE:ATTR | --demo) [--host H] [--port P] [--ray-address A] (--keys FILE | --open)
             [--replicas N]   (N front door replicas on Ray Serve instead of one uvicorn process)
troupe runs list|show|cancel, troupe approve|decline|resume RUN [CALL]   (--server | --app | --store)
troupe mcp (--app MODULE:ATTR | --demo) [--keys FILE --key KEY | --as NAME] [--public-url URL]   (stdio)
troupe keys new --file FILE --subject S [...], troupe keys convert FILE   (API keys stored as digests)
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Sequence
from typing import Any

# The demo's SQLite file, here so that parsing imports neither Ray nor agents (the demo is handed it).
DEFAULT_STORE = "troupe-demo.db"


def build_parser(only_serve: bool = False) -> argparse.ArgumentParser:
    """The command line; ``only_serve`` leaves the other commands (and the modules that define them)
    out, so that ``troupe serve`` gets to its port at once."""
    parser = argparse.ArgumentParser(prog="troupe", description="Troupe: human-in-the-loop agents on Ray.")
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    if only_serve:
        _add_serve(commands)
        return parser
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
    _add_serve(commands)
    _add_mcp(commands)
    from troupe.ops.keys import add_keys_command
    from troupe.ops.operator import add_commands

    add_commands(commands)
    add_keys_command(commands)
    return parser


class _Version(argparse.Action):
    """``troupe --version``: the distribution's name tells this Troupe from the unrelated ``troupe``
    (looked up only when asked: reading the installed metadata is not free)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the installed version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        from troupe.ops.version import DISTRIBUTION, installed_version

        print(f"{DISTRIBUTION} {installed_version()}")
        parser.exit()


def _add_serve(commands: Any) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve a runtime's agents over HTTP (Mastra-compatible routes under /api)",
        description="Serve a Runtime over HTTP with uvicorn until SIGTERM or Ctrl-C, then shut it down "
        "cleanly. Callers authenticate with API keys (Authorization: Bearer <key>) from --keys, each "
        "limited to its resources or an admin; --open lets anyone in (local use only).",
    )
    _add_serve_source(serve)
    _add_serve_listener(serve)
    _add_serve_access(serve)
    serve.add_argument(
        "--notify",
        metavar="FILE",
        help='JSON webhook targets for pauses and decisions: {"targets": [{"url": ..., "secret": '
        '"whsec_..." or "secret_env": VAR, "agents"/"tools"/"resources": [...]}], "links": {...}}',
    )
    serve.add_argument(
        "--log-level", default="info", choices=("critical", "error", "warning", "info", "debug")
    )


def _add_mcp(commands: Any) -> None:
    mcp = commands.add_parser(
        "mcp",
        help="serve a runtime's agents to an MCP client over stdin/stdout (each agent is a tool)",
        description="Serve a Runtime's agents as MCP tools on this process's stdin and stdout, for the "
        "MCP client that started it. A pause reaches the client as an elicitation; a client that cannot "
        "answer one gets the run id and where to decide it. Needs troupe-runtime[mcp].",
    )
    _add_serve_source(mcp)
    mcp.add_argument("--keys", metavar="FILE", help="API keys file: the caller is --key's principal")
    mcp.add_argument("--key", metavar="KEY", help="the caller's key (default: $TROUPE_API_KEY)")
    mcp.add_argument(
        "--as",
        dest="as_name",
        default=os.environ.get("USER") or "mcp-stdio",
        metavar="NAME",
        help="without --keys: the admin the caller acts as, in the audit log (default: $USER)",
    )
    mcp.add_argument(
        "--public-url",
        metavar="URL",
        help="where people reach this runtime's HTTP front door (named in results of paused runs)",
    )
    mcp.add_argument("--ray-address", metavar="ADDRESS", help="join this Ray cluster instead of starting one")


def _mcp(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from troupe.api.auth import KeyRing
    from troupe.ops.apps import load_runtime
    from troupe.ops.mcp_stdio import principal_for, run

    try:
        keys = KeyRing.load(args.keys) if args.keys else None
    except (OSError, ValueError) as exc:
        parser.error(f"--keys {args.keys}: {exc}")
    principal = principal_for(keys, args.key or os.environ.get("TROUPE_API_KEY"), args.as_name)
    if args.demo:
        _check_store_folder(parser, args.store)

        async def source() -> Any:
            return _demo_runtime(args.store, args.executor, args.ray_address)

    else:

        async def source() -> Any:
            return await load_runtime(args.app, args.ray_address)

    return run(source, principal, args.public_url)


def _add_serve_source(serve: argparse.ArgumentParser) -> None:
    """Which runtime is served: an app's, or the demo's."""
    source = serve.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--app",
        metavar="MODULE:ATTR",
        help="a Runtime, or a function (sync or async) returning one, e.g. myproject.agents:runtime",
    )
    source.add_argument(
        "--demo",
        action="store_true",
        help="serve the demo's records-assistant agent on a SQLite file (see `troupe demo`)",
    )
    serve.add_argument(
        "--store",
        default=DEFAULT_STORE,
        metavar="PATH",
        help="with --demo: the SQLite file (default: %(default)s)",
    )
    serve.add_argument(
        "--executor",
        choices=("ray", "local"),
        default="ray",
        help="with --demo: where agents run (default: ray)",
    )


def _add_serve_listener(serve: argparse.ArgumentParser) -> None:
    """Where it listens and what runs it: one uvicorn process, or replicas on Ray Serve."""
    serve.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: %(default)s)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default: %(default)s)")
    serve.add_argument(
        "--ray-address", metavar="ADDRESS", help="join this Ray cluster instead of starting one"
    )
    serve.add_argument(
        "--replicas",
        type=int,
        metavar="N",
        help="run the front door as a Ray Serve deployment of N replicas (needs troupe-runtime[serve]); each "
        "builds the runtime itself, so its store must be one they all share (Redis, or a SQLite file)",
    )


def _add_serve_access(serve: argparse.ArgumentParser) -> None:
    """Who gets in, and what a request may be."""
    from troupe.api.guards import DEFAULT_MAX_BODY_BYTES

    serve.add_argument(
        "--keys",
        metavar="FILE",
        help="JSON file of API key digests, each with a subject, resources and roles (make one with "
        "`troupe keys new`; a file of plain keys is refused: `troupe keys convert FILE`)",
    )
    _add_serve_oidc(serve)
    serve.add_argument(
        "--open",
        action="store_true",
        help="no key needed: every caller is an admin (local use only: loopback --host only, and "
        "only requests addressed to it by Host are answered)",
    )
    serve.add_argument(
        "--allow-remote-open",
        action="store_true",
        help="let --open bind a non-loopback --host (anyone who reaches it decides every run)",
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="with --open: another Host name to answer to (repeatable)",
    )
    serve.add_argument(
        "--max-body-bytes",
        type=int,
        default=DEFAULT_MAX_BODY_BYTES,
        metavar="N",
        help="largest request body accepted, checked before it is read (default: %(default)s)",
    )


def _add_serve_oidc(serve: argparse.ArgumentParser) -> None:
    """Bearer tokens of an identity provider (OIDC / JWT), checked with PyJWT (troupe.api.tokens)."""
    oidc = serve.add_argument_group("identity provider (OIDC bearer tokens)")
    oidc.add_argument("--oidc-issuer", metavar="URL", help="the tokens' iss, e.g. https://login.example.com")
    oidc.add_argument("--oidc-audience", metavar="AUD", action="append", help="an accepted aud (repeatable)")
    oidc.add_argument(
        "--oidc-jwks-url", metavar="URL", help="the issuer's JWKS (cached; refetched for a new kid)"
    )
    oidc.add_argument("--oidc-jwks-file", metavar="FILE", help="or a JWKS file (read again when it changes)")
    oidc.add_argument(
        "--oidc-algorithm", metavar="ALG", action="append", help="an allowed algorithm (default RS256, ES256)"
    )
    oidc.add_argument("--oidc-roles-claim", metavar="PATH", help="claim with roles (default: roles)")
    oidc.add_argument(
        "--oidc-resources-claim", metavar="PATH", help="claim with resources (default: troupe_resources)"
    )
    oidc.add_argument("--oidc-admin-role", metavar="ROLE", help="a role that makes its holder an admin")
    oidc.add_argument(
        "--oidc-config", metavar="FILE", help='or all of these from a JSON file: {"oidc": {...}}'
    )


def _oidc(args: argparse.Namespace) -> Any:
    """The identity provider's settings from the flags or the config file; None without either."""
    from troupe.api.tokens import OidcSettings, TokenVerifier

    if args.oidc_config:
        return TokenVerifier(OidcSettings.load(args.oidc_config)).settings  # a jwks_file is read now
    if not (args.oidc_issuer or args.oidc_audience):
        return None
    given = {
        "issuer": args.oidc_issuer or "",
        "audience": tuple(args.oidc_audience or ()),
        "jwks_url": args.oidc_jwks_url,
        "jwks_file": args.oidc_jwks_file,
        "algorithms": tuple(args.oidc_algorithm) if args.oidc_algorithm else None,
        "roles_claim": args.oidc_roles_claim,
        "resources_claim": args.oidc_resources_claim,
        "admin_role": args.oidc_admin_role,
    }
    settings = OidcSettings.from_mapping({k: v for k, v in given.items() if v is not None})
    return TokenVerifier(settings).settings  # a jwks_file is read now: missing or broken, refused here


def main(argv: Sequence[str] | None = None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(only_serve=given[:1] == ["serve"])
    args = parser.parse_args(given)
    if args.command == "demo":
        from troupe.ops.demo import run

        _check_store_folder(parser, args.store)
        return run(args.store, args.executor)
    if args.command == "serve":
        return _serve(parser, args)
    if args.command == "mcp":
        return _mcp(parser, args)
    if args.command == "keys":
        from troupe.ops.keys import run_keys

        return run_keys(args)
    if args.command in ("runs", "approve", "decline", "resume"):
        from troupe.ops.operator import run_command

        return run_command(args)
    raise AssertionError(f"unhandled command {args.command!r}")  # argparse rejects unknown commands


def _serve(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from troupe.api.errors import ListenError
    from troupe.api.listener import listen

    _check_serve_args(parser, args)
    try:
        # The port first, before Ray starts or the demo's store is seeded: one in use fails at once.
        listener = listen(args.host, args.port)
    except ListenError as exc:
        print(f"troupe serve: {exc.message}", file=sys.stderr)
        return 1
    keys, notifications, oidc = _serve_files(parser, args)
    if args.replicas is not None:
        listener.close()  # Serve's proxy takes the port itself; it was free a moment ago
        return _serve_on_ray(args, keys, notifications, oidc)
    from troupe.api.serve import serve
    from troupe.ops.apps import load_runtime

    if args.demo:
        source = lambda: _demo_runtime(args.store, args.executor, args.ray_address)  # noqa: E731
    else:
        source = lambda: load_runtime(args.app, args.ray_address)  # noqa: E731
    return serve(
        source,
        host=args.host,
        port=args.port,
        keys=keys,
        open_mode=args.open,
        log_level=args.log_level,
        notifications=notifications,
        max_body_bytes=args.max_body_bytes,
        hosts=[args.host, *args.allowed_host],
        oidc=oidc,
        listener=listener,
    )


def _check_serve_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse what would leave the server open to anyone, or make no sense (exits with the reason)."""
    from troupe.api.guards import is_loopback

    if not args.keys and not args.open and not (args.oidc_issuer or args.oidc_audience or args.oidc_config):
        parser.error(
            "serve needs --keys FILE and/or an identity provider (--oidc-issuer ... --oidc-audience ...), "
            "or --open for local use without keys"
        )
    if args.open and not is_loopback(args.host):
        if not args.allow_remote_open:
            parser.error(
                f"--open lets anyone decide every run, so it binds a loopback address only (got --host "
                f"{args.host}); use --keys FILE, or add --allow-remote-open if you mean it"
            )
        print(
            f"troupe: WARNING: open mode on {args.host}: anyone who can reach it can decide every run",
            file=sys.stderr,
        )
    if args.max_body_bytes < 1:
        parser.error("--max-body-bytes must be at least 1")
    if args.replicas is not None and args.replicas < 1:
        parser.error("--replicas must be at least 1")
    if args.demo:
        _check_store_folder(parser, args.store)


def _check_store_folder(parser: argparse.ArgumentParser, store: str) -> None:
    """The demo's SQLite file may be new, but not its folder: a mistyped path is an error, not a tree of
    new folders."""
    folder = os.path.dirname(os.path.abspath(os.path.expanduser(store)))
    if not os.path.isdir(folder):
        parser.error(f"--store {store}: the folder {folder} does not exist (create it first)")


def _serve_files(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """The API keys, notification targets and identity provider the server reads from files and flags
    (exits naming a bad one)."""
    from troupe.api.auth import KeyRing
    from troupe.ops.apps import load_notifications

    try:
        keys = KeyRing.load(args.keys) if args.keys else None
    except (OSError, ValueError) as exc:
        parser.error(f"--keys {args.keys}: {exc}")
    try:
        notifications = load_notifications(args.notify) if args.notify else None
    except (OSError, ValueError) as exc:
        parser.error(f"--notify {args.notify}: {exc}")
    try:
        oidc = _oidc(args)
    except (OSError, ValueError) as exc:
        parser.error(f"--oidc-*: {exc}")
    return keys, notifications, oidc


def _serve_on_ray(args: argparse.Namespace, keys: Any, notifications: Any, oidc: Any) -> int:
    try:
        from troupe import front_door
    except ImportError as exc:
        needs = "troupe: --replicas needs Ray Serve: pip install 'troupe-runtime[serve]'"
        print(f"{needs} ({exc})", file=sys.stderr)
        return 1
    settings = front_door.DoorSettings(
        keys=keys,
        open_mode=args.open,
        oidc=oidc,
        max_body_bytes=args.max_body_bytes,
        hosts=(args.host, *args.allowed_host),
        notifications=notifications,
    )
    # Each replica makes its own runtime: the demo's by its (absolute) SQLite path, an app by its name.
    path = os.path.abspath(os.path.expanduser(args.store))
    source = functools.partial(_demo_runtime, path, args.executor, None) if args.demo else args.app
    return front_door.run(
        source,
        settings,
        replicas=args.replicas,
        host=args.host,
        port=args.port,
        ray_address=args.ray_address,
    )


def _demo_runtime(store: str, executor: Any, ray_address: str | None) -> Any:
    from troupe import Runtime, SqliteStore
    from troupe.ops.demo_agent import RecordsDB, build_agent, choose_model

    path = os.path.abspath(os.path.expanduser(store))
    db = RecordsDB(path)
    db.setup(seed=True)
    model, _ = choose_model()
    return Runtime(
        [build_agent(db, model)], storage=SqliteStore(path), executor=executor, ray_address=ray_address
    )


if __name__ == "__main__":
    sys.exit(main())
