"""What compiler calls made, kept between runs: the SQLite transition cache and the store on it.

`transition_cache` is the database (schema, eviction, damaged files set aside); `transition_store`
keys a transition by everything that decides it (`xlabench.xla.compilers.build_identity` included).
"""
