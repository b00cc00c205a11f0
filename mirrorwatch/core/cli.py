"""What every command does with bad input: one clear line on stderr, a non-zero exit, no traceback."""

from __future__ import annotations

import logging
import os
import sys
from typing import Callable

import click

from .access import AccessProblem, any_connection_problem
from .config import ConfigError
from .redact import install_log_redaction, redact_text


class UserError(Exception):
    """A problem the user can act on; ``exit_code`` is what the command exits with."""

    def __init__(self, message: str, exit_code: int = 2):
        super().__init__(message)
        self.exit_code = exit_code


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    install_log_redaction()


def run_click(group: click.Command, prog: str, config_exit_code: int = 2, internal_exit_code: int = 1) -> Callable[[], None]:
    """Wrap a click command so that errors become one line and an exit code."""

    def main(argv: list[str] | None = None) -> None:
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
        except ConfigError as exc:
            _fail(prog, str(exc), config_exit_code)
        except UserError as exc:
            _fail(prog, str(exc), exc.exit_code)
        except AccessProblem as exc:
            _fail(prog, str(exc), exc.exit_code if exc.exit_code is not None else internal_exit_code)
        except KeyboardInterrupt:
            sys.exit(130)
        except (SystemExit, GeneratorExit):
            raise
        except BaseException as exc:  # the last line of defence (librdkafka errors can arrive as non-Exception types)
            if os.environ.get("MIRRORWATCH_DEBUG"):
                raise
            _fail(prog, f"internal error: {type(exc).__name__}: {exc} (set MIRRORWATCH_DEBUG=1 for a traceback)", internal_exit_code)
        sys.exit(rv if isinstance(rv, int) else 0)

    return main


def _fail(prog: str, message: str, code: int) -> None:
    # A failed SASL/TLS handshake makes requests time out; whatever the command concluded ("cannot reach",
    # a timeout), the recorded handshake failure is the cause the user can fix.
    message = any_connection_problem() or message
    click.echo(f"{prog}: {redact_text(message)}", err=True)
    sys.exit(code)
