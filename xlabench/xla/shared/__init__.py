"""Plain Python both sides of the compiler boundary use: no jaxlib, no state of the caller.

Failure kinds a worker raises and its caller raises again (`failures`), the supported releases and the
variables a worker is started with (`releases`), module text structure and fingerprints
(`module_structure`), the module's name at the boundary (`module_names`), element types
(`element_types`), large constants by digest (`payloads`) and the cache directory (`cache_directory`).
"""
