"""What `xlabench stats` measures of a module: features, D and a full compile, from the compiler."""

from __future__ import annotations

import json

from xlabench.xla.driver.module_stats import module_stats


def test_a_module_is_measured_before_and_after_xlas_default_pipeline(redundant_module):
    # log(exp(y)), negate(negate(y)) and a duplicated multiply: XLA's default pipeline removes them.
    stats = module_stats(redundant_module)
    assert (stats.source, stats.name) == (redundant_module.source, redundant_module.name)
    assert stats.fingerprint == redundant_module.fingerprint
    assert stats.features.op_count == 9 and stats.features.histogram["multiply"] == 2
    assert stats.default_op_count < stats.features.op_count and stats.full_compile_seconds > 0
    report = json.loads(json.dumps(stats.to_json()))
    assert report["op_count"] == 9 and report["default_op_count"] == stats.default_op_count
    assert set(report) == {"graph", "name", "fingerprint", "op_count", "histogram", "cost",
                           "default_op_count", "full_compile_seconds"}  # fmt: skip
    assert set(report["cost"]) == {"flops", "transcendentals", "bytes_accessed"}
