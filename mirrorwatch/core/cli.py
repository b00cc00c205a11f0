"""What every command does with bad input: one clear line on stderr, a non-zero exit, no traceback."""

from __future__ import annotations

import faulthandler
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

import click

from .redact import install_log_redaction, redact_text

# The config model (pydantic) and the client library (.access) are imported when an error needs them, not here:
# every command's --help, and so its start-up, would pay for them (bench/startup.py).


class UserError(Exception):
    """A problem the user can act on; ``exit_code`` is what the command exits with."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


class LazyGroup(click.Group):
    """A command group whose subcommands are imported only when one of them is run (or its own --help asked).

    ``lazy`` maps a subcommand's name to ``(module:attribute, short help)``. The group's --help lists them with
    that short help without importing them; tests/test_startup.py checks it is the command's own. So ``mirror
    --help`` does not load the failover tools (rich, the metrics, numpy), nor ``monitor lag --help`` the Spark
    job's options."""

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            self.add_command(self.load(cmd_name), cmd_name)
        return super().get_command(ctx, cmd_name)

    def load(self, name: str) -> click.Command:
        import importlib

        module, attribute = self.lazy[name][0].split(":")
        command = getattr(importlib.import_module(module), attribute)
        if not isinstance(command, click.Command):
            raise TypeError(f"{module}:{attribute} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = [n for n in self.list_commands(ctx) if n in self.lazy or not self.commands[n].hidden]
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)  # as click.Group's own listing
        rows = [
            (
                n,
                self.commands[n].get_short_help_str(limit)
                if n in self.commands
                else click.Command(n, help=self.lazy[n][1]).get_short_help_str(limit),
            )
            for n in names
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def listen_error(exc: OSError, host: str, port: int, setting: str) -> str:
    """One line for a server socket that could not be opened, naming the port and the setting that chose it."""
    import errno

    if exc.errno == errno.EADDRINUSE:
        return f"port {port} on {host} is already in use ({setting}); stop what holds it or choose another port (0 = any free one)"
    if exc.errno == errno.EACCES:
        return f"no permission to listen on port {port} on {host} ({setting}); choose a port above 1023"
    return f"cannot listen on {host}:{port} ({setting}): {exc.strerror or exc}"


def quiet_client_logs(quiet: bool = True) -> None:
    """librdkafka's own log lines: off (the default), or on at DEBUG for -v."""
    logging.getLogger("mirrorwatch.kafka.client").setLevel(logging.CRITICAL + 1 if quiet else logging.DEBUG)


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    quiet_client_logs(not verbose)
    install_log_redaction()


def run_click(
    group: click.Command,
    prog: str,
    config_exit_code: int = 2,
    internal_exit_code: int = 1,
    json_error_fields: dict[str, Any] | None = None,
) -> Callable[[], None]:
    """Wrap a click command so that errors become one line and an exit code.

    With ``--json`` on the command line an error is also one JSON object on stdout (``{"error": line,
    "exit_code": n}`` plus ``json_error_fields``), so an integration parsing --json always gets JSON; the line
    still goes to stderr for the person watching.
    """

    def main(argv: list[str] | None = None) -> None:
        # A crash inside the client library (native code) would otherwise leave only "exit -11": with this,
        # every thread's Python stack goes to stderr, i.e. into the service's log.
        if not faulthandler.is_enabled():
            faulthandler.enable()
        try:
            command(argv)
        except SystemExit:
            if argv is None:  # the process's own entry point (tests pass argv and get the SystemExit)
                _flush_output()
            raise  # and the interpreter tears down normally: atexit handlers run (docs/design.md, "Teardown")

    def command(argv: list[str] | None) -> None:
        args = sys.argv[1:] if argv is None else argv
        as_json = "--json" in args[: args.index("--")] if "--" in args else "--json" in args

        def _fail(prog: str, message: str, code: int) -> None:
            _report(prog, message, code, as_json, json_error_fields)

        try:
            rv = group.main(args=argv, prog_name=prog, standalone_mode=False)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            sys.exit(130)
        except click.UsageError as exc:
            hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
            _fail(prog, f"{exc.format_message()}{hint}", config_exit_code)
        except click.ClickException as exc:
            _fail(prog, exc.format_message(), config_exit_code)
        except UserError as exc:
            _fail(prog, str(exc), exc.exit_code)
        except KeyboardInterrupt:
            sys.exit(130)
        except (SystemExit, GeneratorExit):
            raise
        except BaseException as exc:  # the last line of defence (librdkafka errors can arrive as non-Exception types)
            known = _known_failure(exc, config_exit_code, internal_exit_code)
            if known is not None:
                _fail(prog, *known)
            if os.environ.get("MIRRORWATCH_DEBUG"):
                raise
            _fail(
                prog,
                f"internal error: {type(exc).__name__}: {exc} (set MIRRORWATCH_DEBUG=1 for a traceback)",
                internal_exit_code,
            )
        sys.exit(rv if isinstance(rv, int) else 0)

    return main


def _known_failure(exc: BaseException, config_exit_code: int, internal_exit_code: int) -> tuple[str, int] | None:
    """The line and exit code of a failure the user can act on (a bad config, a missing extra, access refused),
    or None for an internal error."""
    from .access import AccessProblem
    from .config import ConfigError
    from .extras import MissingExtra

    if isinstance(exc, ConfigError):
        return str(exc), config_exit_code
    if isinstance(exc, MissingExtra):
        return str(exc), exc.exit_code
    if isinstance(exc, AccessProblem):
        return str(exc), exc.exit_code if exc.exit_code is not None else internal_exit_code
    return None


def _flush_output() -> None:
    """Flush stdout and stderr before the interpreter's teardown; a reader that went away (a closed pipe) gets
    nothing more, and the teardown does not fail on it (exit 120) either."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe, or a stream already closed
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
            except (OSError, ValueError):
                pass


def _report(
    prog: str,
    message: str,
    code: int,
    as_json: bool = False,
    json_fields: dict[str, Any] | None = None,
) -> None:
    # A failed SASL/TLS handshake makes requests time out; whatever the command concluded ("cannot reach",
    # a timeout), the recorded handshake failure is the cause the user can fix.
    from .access import any_connection_problem

    line = redact_text(any_connection_problem() or message)
    if as_json:
        click.echo(json.dumps({**(json_fields or {}), "error": line, "exit_code": code}))
    click.echo(f"{prog}: {line}", err=True)
    sys.exit(code)
