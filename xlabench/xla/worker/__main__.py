"""Entry point of a compiler worker process: `python -m xlabench.xla.worker FD`.

Serves `(request id, function name, arguments)` requests over the socket FD until it closes, running
only the functions of `xlabench.xla.worker.registry.REGISTRY`. Started by
`xlabench.xla.compilers.worker_pool`, which has already pointed this process's stderr at a log file.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any


def serve(connection: Connection) -> None:
    """Answer requests until the pipe closes: (id, status, result or message).

    The status is "ok", "failure" (an answer about the module), "transient" (one that may not hold
    next time: never cached), "driver" (xlabench could not read
    what XLA did), "unsupported" (this jaxlib, not the
    module: a release outside the supported range, or an internal API the adapter does not find,
    never reported as a bad module) or "refused" (a function the registry does not hold).
    """
    from xlabench.xla.shared.failures import CompilerFailure, DriverFailure, TransientFailure
    from xlabench.xla.shared.releases import UnsupportedCompiler

    registry: dict[str, Callable[..., Any]] = {}
    unsupported = None
    try:
        from xlabench.xla.worker.registry import REGISTRY as registry
    except UnsupportedCompiler as error:
        unsupported = str(error)
    except Exception as error:  # a jaxlib whose jax or internals do not import: an install, not a module
        first = (str(error).strip().splitlines() or [""])[0]
        unsupported = f"this Python cannot import the compiler: {type(error).__name__}: {first}"

    while True:
        try:
            request_id, function_name, arguments = connection.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if unsupported is not None:
            connection.send((request_id, "unsupported", unsupported))
            continue
        function = registry.get(function_name)
        if function is None:
            known = ", ".join(sorted(registry))
            connection.send(
                (request_id, "refused", f"no compiler function {function_name!r} (known: {known})")
            )
            continue
        try:
            reply = (request_id, "ok", function(**arguments))
        except TransientFailure as failure:  # before CompilerFailure: a kind of it the caller must not keep
            reply = (request_id, "transient", str(failure))
        except CompilerFailure as failure:
            reply = (request_id, "failure", str(failure))
        except DriverFailure as failure:  # xlabench cannot tell what XLA did: never a module's answer
            reply = (request_id, "driver", str(failure))
        except UnsupportedCompiler as error:  # this jaxlib's API, not the module (`adapter._entry_point`)
            reply = (request_id, "unsupported", str(error))
        except Exception as error:  # anything else is still an answer about the module, not a crash
            lines = str(error).strip().splitlines()
            reply = (request_id, "failure", f"{type(error).__name__}: {lines[0] if lines else ''}")
        connection.send(reply)


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])))
