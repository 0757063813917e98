"""Whatever a module is called, the driver reads XLA's work exactly, and never mistakes a lost dump
for a pass that changed nothing."""

from __future__ import annotations

import re
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xlabench.errors import DriverError
from xlabench.xla import HloModule, PassDriver
from xlabench.xla.caches.transition_cache import TransitionCache
from xlabench.xla.compilers.named_compilers import installed_compiler
from xlabench.xla.compilers.worker_pool import CompilerPool
from xlabench.xla.diagnosis.pipeline_replay import replay_default_pipeline
from xlabench.xla.shared.module_names import INTERNAL_MODULE_NAME, under_internal_name, with_module_name

# Names XLA's parser takes, as other producers write them: torch-xla, TensorFlow's XLA clusters,
# jax, a name that looks like a dump file's step number, a very long one.
FOREIGN_NAMES = (
    "SyncTensorsGraph.2081",
    "cluster_0__XlaCompiledKernel_true__XlaHasReferenceVars_false__XlaNumConstantArgs_0__XlaNumResourceArgs_0_.2963",
    "jit_train_step",
    "a.0001.simplification.after_algsimp",
    "before_optimizations",
    "x-y.z_" + "w" * 300,
)
# XLA's name token: a letter or "_", then letters, digits, "_", "." and "-" -- but not a word its lexer
# reads as a keyword or an element type (XLA refuses `HloModule f32`).
_NOT_NAMES = re.compile(
    r"(pred|[suf]\d+|bf16|c64|c128|f8\w*|f4\w*|token|opaque|true|false|inf|nan|ENTRY|ROOT)"
)
xla_names = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_.\-]{0,60}\Z").filter(
    lambda name: not _NOT_NAMES.fullmatch(name)
)


def renamed(module: HloModule, name: str) -> str:
    """The module's text under another name (header and ENTRY alike)."""
    text, _ = under_internal_name(module.text)
    return with_module_name(text, name)


@pytest.mark.parametrize("name", FOREIGN_NAMES)
def test_a_header_is_renamed_and_named_back(name):
    alias = "input_output_alias={ {0}: (0, {}, may-alias) }"
    text = f"// dumped by someone else\nHloModule {name}, {alias}\n\n"
    internal, found = under_internal_name(text)
    assert found == name and internal.startswith(
        f"// dumped by someone else\nHloModule {INTERNAL_MODULE_NAME},"
    )
    assert under_internal_name("HloModule %m.1\n")[1] == "m.1"
    assert with_module_name(under_internal_name(f"HloModule {name}\n")[0], name) == f"HloModule {name}\n"
    with pytest.raises(DriverError, match="does not start with"):
        with_module_name("HloModule someone_else, x", name)


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("/* a\n block */ // line\r\nHloModule %m.1, x\r\n", "m.1"),  # comments, CRLF, a % name
        ("HloModule%m.2\n", "m.2"),
        # A block comment ends at its first */: the metadata's "HloModule b" is no header.
        (
            "/* c */\nENTRY %e () -> f32[] {\n  ROOT %x = f32[] constant(1), "
            'metadata={op_name="a */ HloModule b"}\n}\n',
            "e",
        ),
        ("\n\n    ENTRY %indented.4 () -> f32[] {", "indented.4"),
    ],
)
def test_header_forms_xla_takes_are_read_and_nothing_else(text, name):
    internal, found = under_internal_name(text)
    renamed_header = text.replace(f"HloModule %{name}", f"HloModule %{INTERNAL_MODULE_NAME}", 1).replace(
        f"HloModule%{name}", f"HloModule%{INTERNAL_MODULE_NAME}", 1
    )
    given_header = f"HloModule {INTERNAL_MODULE_NAME} {text}"  # a text without one (on its first line)
    assert found == name and internal in (renamed_header, given_header) and internal != text


def test_a_text_without_a_header_is_read_at_once_whatever_it_starts_with():
    # Nested quantifiers over leading whitespace once made a header-less text take seconds per space.
    started = time.perf_counter()
    assert under_internal_name("\n" + " " * 5000 + "ENTRY %main () -> f32[] {}")[1] == "main"
    assert time.perf_counter() - started < 0.5


def test_a_module_without_a_header_is_named_after_its_entry(data_directory, redundant_module):
    text = (data_directory / "redundant.hlo").read_text()
    module = HloModule.from_text(text.split("\n", 1)[1].replace("ENTRY main", "ENTRY %main.7"))
    assert module.name == "main.7" and module.text.startswith("HloModule main.7")


@pytest.mark.parametrize("name", FOREIGN_NAMES)
def test_every_name_replays_onto_xlas_own_module(uncached_driver, redundant_module, name):
    module = HloModule.from_text(renamed(redundant_module, name))
    assert module.name == name and module.text.startswith(f"HloModule {name}")
    default = uncached_driver.run_default_pipeline(module)
    replay = replay_default_pipeline(uncached_driver, module)
    assert replay.module.fingerprint == default.fingerprint
    after = uncached_driver.apply_pass(module, "algsimp")
    assert after.name == name and after.fingerprint != module.fingerprint


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=xla_names, passes=st.lists(st.sampled_from(["algsimp", "cse", "dce", "reshape-mover"]), max_size=4)
)
def test_counts_after_any_sequence_do_not_depend_on_the_name(tmp_path, redundant_module, name, passes):
    # A renamed copy, with the cache on (records made under the other name) and off: the same counts.
    cached = PassDriver(cache=TransitionCache(str(tmp_path / "transitions.sqlite")))
    uncached = PassDriver(use_cache=False)
    original = redundant_module
    copy = HloModule.from_text(renamed(original, name))
    counts = []
    for driver in (cached, uncached):
        for module in (original, copy):
            for pass_name in passes:
                module = driver.apply_pass(module, pass_name)
            counts.append((module.fingerprint, driver.fair_op_count(module, passes)))
    assert len(set(counts)) == 1


LOSING_DUMPS = """
    # Every stopped compile of this worker loses the dump files named below.
    import os
    from xlabench.xla.worker import stopped_compiles

    _compile = stopped_compiles.compile_until_stop

    def _compile_and_lose(text, overrides):
        _compile(text, overrides)
        folder = overrides["xla_dump_to"]
        for name in os.listdir(folder):
            if any(part in name for part in {hidden!r}):
                os.remove(os.path.join(folder, name))

    stopped_compiles.compile_until_stop = _compile_and_lose
"""
NO_STOP_MARKER = """
    # This worker's compiles have no stop marker: they run to the end.
    from xlabench.xla.worker import stopped_compiles

    stopped_compiles.add_stop_marker = lambda text: text
"""


def driver_with_worker_defect(tmp_path: Path, code: str, cache: TransitionCache | None = None) -> PassDriver:
    """A driver whose worker runs `code` at start (as its sitecustomize): a defect of the driver's own."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(code))
    # The installed compiler's worker, whose PYTHONPATH the pool extends (an added compiler's does not).
    pool = CompilerPool(environment={"PYTHONPATH": str(site)}, compiler=installed_compiler())
    return PassDriver(
        pool=pool, cache=cache, use_cache=cache is not None, crash_directory=str(tmp_path / "crashes")
    )


@pytest.mark.parametrize(
    ("hidden", "expected"),
    [
        (["before_optimizations"], "dump of the module as given"),
        # Every dump after a run of algsimp: a gap in XLA's numbering, or a run without its after-dump.
        ([".after_algsimp."], r"dump number \d{4} is missing|after the run is missing"),
        ([".xlabench_module.0000."], "dump number 0000 is missing"),
    ],
)
def test_a_lost_dump_is_a_driver_error_never_an_unchanged_module(
    tmp_path, redundant_module, hidden, expected
):
    driver = driver_with_worker_defect(tmp_path, LOSING_DUMPS.format(hidden=hidden))
    try:
        with pytest.raises(DriverError, match=expected) as raised:
            driver.apply_pass(redundant_module, "algsimp")
        assert "xlabench's defect, not XLA's" in str(raised.value)
        assert raised.value.reproducer and (Path(raised.value.reproducer) / "module.hlo").exists()
    finally:
        driver.pool.close()


def test_a_driver_error_is_never_kept_as_the_passs_answer(tmp_path, redundant_module):
    cache = str(tmp_path / "transitions.sqlite")
    lose = LOSING_DUMPS.format(hidden=["before_optimizations"])
    broken = driver_with_worker_defect(tmp_path, lose, TransitionCache(cache))
    try:
        with pytest.raises(DriverError):
            broken.apply_pass(redundant_module, "algsimp")
    finally:
        broken.pool.close()
    # The same cache, a sound driver: the pass runs (nothing of the failure was kept).
    sound = PassDriver(cache=TransitionCache(cache))
    assert sound.apply_pass(redundant_module, "algsimp").fingerprint != redundant_module.fingerprint


def test_a_lost_dump_of_the_pipeline_is_a_driver_error(tmp_path, redundant_module):
    driver = driver_with_worker_defect(tmp_path, LOSING_DUMPS.format(hidden=["before_optimizations"]))
    try:
        with pytest.raises(DriverError, match="dump of the module as given"):
            driver.run_default_pipeline(redundant_module)
    finally:
        driver.pool.close()


def test_a_stop_marker_that_never_fires_is_a_driver_error(tmp_path, redundant_module):
    driver = driver_with_worker_defect(tmp_path, NO_STOP_MARKER)
    try:
        with pytest.raises(DriverError, match="not stopped by the stop marker"):
            driver.apply_pass(redundant_module, "algsimp")
    finally:
        driver.pool.close()
