"""Pass names checked against a compiler's catalogue, with a hint at the names meant."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from xlabench.errors import UnknownPassError
from xlabench.xla.compilers.pass_catalogue import FIXED_POINT_SUFFIX, STOP_PASS, PassCatalogue, base_pass


def _hint(catalogue: PassCatalogue, pass_name: str) -> str:
    """ " (did you mean ...?)" with the closest names of the catalogue, else where to look them up."""
    close = difflib.get_close_matches(pass_name, catalogue.names(), n=3)
    return f" (did you mean {', '.join(close)}?)" if close else " (see `xlabench passes`)"


def check_applicable(catalogue: PassCatalogue, pass_name: str) -> None:
    """Raise UnknownPassError unless `pass_name` can be applied alone."""
    info = catalogue.get(pass_name)
    if pass_name.endswith(FIXED_POINT_SUFFIX) and (
        info is None or catalogue.fixed_point_variant(info.name) != pass_name
    ):
        raise UnknownPassError(
            f"{pass_name}: {base_pass(pass_name)} does not first run in a fixed-point pipeline"
        )
    if info is not None and info.kind == "pipeline":
        raise UnknownPassError(f"{pass_name}: is a pass pipeline, not a single pass")
    if info is not None:
        stop = catalogue.passes[STOP_PASS]
        if info.position >= stop.position:
            raise UnknownPassError(
                f"{pass_name}: first runs at or after {STOP_PASS}, where a single-pass compile stops"
            )
        return
    raise UnknownPassError(
        f"{pass_name}: unknown pass for jaxlib {catalogue.jaxlib_version}{_hint(catalogue, pass_name)}"
    )


def check_disablable(catalogue: PassCatalogue, pass_names: Iterable[str]) -> None:
    """Raise UnknownPassError unless every one of `pass_names` is in the catalogue (and can be turned off)."""
    for pass_name in pass_names:
        if catalogue.get(pass_name) is None:
            raise UnknownPassError(
                f"{pass_name}: cannot disable an unknown pass for jaxlib {catalogue.jaxlib_version}"
                f"{_hint(catalogue, pass_name)}"
            )
