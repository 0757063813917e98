"""The worker side of the compiler boundary: code that runs only inside a compiler worker process.

`python -m xlabench.xla.worker FD` (`__main__`) serves the functions of `registry.REGISTRY`; the
jobs live beside it: module text in and out of XLA (`module_text`), stopped compiles and their dumps
(`stopped_compiles`), single-pass compiles and pipeline runs (`pass_runs`), features and cost
(`module_analysis`), executables (`executable_cache`, `executable_timing`); jaxlib only in `adapter`.
Nothing here imports the caller's side (`tests/test_layers.py`): only `xlabench.xla.shared`.
"""
