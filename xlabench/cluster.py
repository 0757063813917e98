"""Connecting to a Ray cluster for `--ray ADDRESS` (an optional extra: `pip install -e ".[ray]"`)."""

from __future__ import annotations

import re
import socket
from typing import Any

from xlabench.errors import UserInputError


def connect(address: str) -> Any:
    """Connect to the Ray cluster at `address` (`auto`, `HOST:PORT`, `ray://...`); return the module."""
    try:
        import ray
    except ImportError:
        raise UserInputError('--ray needs Ray: pip install -e ".[ray]"') from None
    if not ray.is_initialized():
        _probe(address)
        try:
            ray.init(address=address, log_to_driver=False, include_dashboard=False)
        except (ConnectionError, ValueError, RuntimeError) as error:
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise UserInputError(f"--ray {address}: cannot connect to a Ray cluster: {first}") from None
    return ray


def _probe(address: str) -> None:
    """Refuse a HOST:PORT nothing listens on at once: Ray itself retries for minutes."""
    match = re.fullmatch(r"(?:ray://)?([\w.\-]+):(\d+)", address)
    if match is None:
        return
    try:
        socket.create_connection((match.group(1), int(match.group(2))), timeout=10).close()
    except OSError as error:
        raise UserInputError(
            f"--ray {address}: cannot connect to a Ray cluster: {error.strerror or error}"
        ) from None
