"""Files: written so that an interrupted run never leaves a half-written one; where xlabench runs from."""

from __future__ import annotations

import io
import json
import os
import tempfile
from pathlib import Path
from typing import Any

# Read once, at import (one thread): os.umask can only be read by setting it.
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to a temporary file beside `path`, then rename it over `path`."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        # mkstemp makes the file private (0600); a result file gets the usual mode (0666 - umask).
        os.chmod(temporary, 0o666 & ~_UMASK)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def checkout_directory() -> Path | None:
    """The source checkout xlabench runs from (an editable install), or None when installed from a wheel."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() and (root / "xlabench").is_dir() else None


def png_bytes(figure: Any, dpi: int = 110) -> bytes:
    """A matplotlib figure as PNG bytes (tight bounding box); the figure is closed."""

    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    plt.close(figure)
    return buffer.getvalue()


def json_bytes(document: Any, sort_keys: bool = False) -> bytes:
    """`document` as the JSON every xlabench file holds: indented by one, with a final newline."""

    return (json.dumps(document, indent=1, sort_keys=sort_keys) + "\n").encode()


def write_json(path: str | os.PathLike[str], document: Any, sort_keys: bool = False) -> None:
    """Write `document` as indented JSON with a final newline, atomically (`write_atomically`)."""
    write_atomically(path, json_bytes(document, sort_keys))
