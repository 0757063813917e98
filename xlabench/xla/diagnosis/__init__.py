"""Where xlabench checks itself against XLA and compilers against each other.

The replay of XLA's default pipeline pass by pass (`pipeline_replay`), and the first pass at which two
compilers' runs on a module part (`attribution`).
"""
