"""One error type for every bad input, and the CLI wrapper that shows it as one line."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn


class PipelineError(Exception):
    """Bad input: the message is the whole story, shown to the user as one line."""


def run_cli(main: Callable[[], int | None], fast_exit: bool = False) -> NoReturn:
    """Runs `main`, a `PipelineError` as one stderr line, exit code 2 (`fast_exit`: `os._exit`)."""
    try:
        code = main()
    except PipelineError as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # The reader went away (`script | head`); /dev/null takes the final flush.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    if fast_exit:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 0)
    sys.exit(code or 0)
