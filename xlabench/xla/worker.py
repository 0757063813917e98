"""Entry point of a compiler worker process: `python -m xlabench.xla.worker FD`.

Serves `(request id, function name, arguments)` requests from `xlabench.xla.compiler` over the
socket FD until it closes. Started by `xlabench.xla.pool`, which has already pointed this process's
stderr at a log file.
"""

from __future__ import annotations

import sys
from multiprocessing.connection import Connection


def serve(connection: Connection) -> None:
    """Answer requests until the pipe closes: (id, "ok" | "failure" | "unsupported", result or message).

    "unsupported" means this jaxlib, not the module: a release outside the supported range, or an
    internal API the adapter does not find (an AttributeError), never reported as a bad module.
    """
    from xlabench.xla.pool import CompilerFailure
    from xlabench.xla.releases import UnsupportedCompiler

    try:
        from xlabench.xla import compiler
    except UnsupportedCompiler as error:
        compiler, unsupported = None, str(error)
    except Exception as error:  # a jaxlib whose jax or internals do not import: an install, not a module
        first = (str(error).strip().splitlines() or [""])[0]
        compiler, unsupported = (
            None,
            f"this Python cannot import the compiler: {type(error).__name__}: {first}",
        )

    while True:
        try:
            request_id, function_name, arguments = connection.recv()
        except (EOFError, OSError, KeyboardInterrupt):
            return
        if compiler is None:
            connection.send((request_id, "unsupported", unsupported))
            continue
        try:
            reply = (request_id, "ok", getattr(compiler, function_name)(**arguments))
        except CompilerFailure as failure:
            reply = (request_id, "failure", str(failure))
        except UnsupportedCompiler as error:  # this jaxlib's API, not the module (`adapter._entry_point`)
            reply = (request_id, "unsupported", str(error))
        except Exception as error:  # anything else is still an answer about the module, not a crash
            lines = str(error).strip().splitlines()
            reply = (request_id, "failure", f"{type(error).__name__}: {lines[0] if lines else ''}")
        connection.send(reply)


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1])))
