"""Typed errors shared by every layer; the CLI turns them into one line and a non-zero exit."""

from __future__ import annotations


class XlabenchError(Exception):
    """Base of every error xlabench raises on purpose."""


class UserInputError(XlabenchError):
    """Bad input from the user: missing file, malformed HLO, unknown pass or graph."""


class UnknownPassError(UserInputError):
    """A pass name that the installed XLA CPU pipeline does not have (or may not be applied)."""


def _said(
    what: str, message: str, pass_name: str | None, fingerprint: str | None, reproducer: str | None
) -> str:
    """A compiler call's failure as one line: what, in which pass, on which module, why, the reproducer."""
    where = f" in pass {pass_name}" if pass_name else ""
    module = f" on module {fingerprint[:12]}" if fingerprint else ""
    saved = f" (reproducer: {reproducer})" if reproducer else ""
    return f"{what}{where}{module}: {message}{saved}"


class CompilerError(XlabenchError):
    """A compiler call that failed: XLA's error status, a crash of the compiler process, or a hang.

    `kind` is "error", "crash" or "timeout"; `reproducer` is the directory holding the module text and
    the pass list that reproduce it. `deterministic` says whether the same call would fail the same
    way again (an error status, a CHECK abort) -- not so a hang or a process killed from outside
    (the out-of-memory killer) -- and so whether the failure may be cached.
    """

    def __init__(
        self,
        kind: str,
        message: str,
        pass_name: str | None = None,
        fingerprint: str | None = None,
        stderr_tail: str = "",
        reproducer: str | None = None,
        deterministic: bool = True,
    ) -> None:
        self.kind = kind
        self.deterministic = deterministic
        self.message = message
        self.pass_name = pass_name
        self.fingerprint = fingerprint
        self.stderr_tail = stderr_tail
        self.reproducer = reproducer
        super().__init__(_said(f"compiler {kind}", message, pass_name, fingerprint, reproducer))

    @classmethod
    def from_dict(cls, data: dict[str, str | None]) -> CompilerError:
        """Inverse of to_dict (errors come back from the transition cache this way)."""
        return cls(
            str(data["kind"]),
            str(data["message"]),
            data["pass"],
            data["fingerprint"],
            data["stderr_tail"] or "",
            data["reproducer"],
        )

    def to_dict(self) -> dict[str, str | None]:
        """The error as plain data, for --json output and crash reports."""
        return {
            "kind": self.kind,
            "message": self.message,
            "pass": self.pass_name,
            "fingerprint": self.fingerprint,
            "stderr_tail": self.stderr_tail,
            "reproducer": self.reproducer,
        }


class DriverError(XlabenchError):
    """xlabench could not tell what XLA did: a dump missing or unreadable, a stop that never fired.

    The driver's own defect, not the compiler's and not the module's: never cached, never taken for
    "unchanged" or for a pass that failed; it stops what asked, with a reproducer to report.
    """

    def __init__(
        self, message: str, pass_name: str | None = None, fingerprint: str | None = None,
        reproducer: str | None = None,
    ) -> None:  # fmt: skip
        self.message = message
        self.pass_name = pass_name
        self.fingerprint = fingerprint
        self.reproducer = reproducer
        said = _said("driver error", message, pass_name, fingerprint, reproducer)
        super().__init__(f"{said} (xlabench's defect, not XLA's)")


def differing_settings(stored: dict, current: dict) -> str:
    """The keys whose values differ between two settings documents, with both values: for the one-line
    refusal of a checkpoint made by another run."""

    def shown(value: object) -> str:
        text = repr(value)
        return text if len(text) <= 80 else text[:77] + "..."

    missing = object()

    def value(settings: dict, key: str) -> object:
        return settings.get(key, missing)

    def text(settings: dict, key: str) -> str:
        return shown(settings[key]) if key in settings else "(absent)"

    keys = sorted(key for key in {*stored, *current} if value(stored, key) != value(current, key))
    return ", ".join(f"{key} {text(stored, key)} here {text(current, key)}" for key in keys)
