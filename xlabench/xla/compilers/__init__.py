"""The caller's side of the compiler boundary: which compiler, its worker processes, calls into them.

Named compilers side by side (`named_compilers`) and their build identity (`build_identity`); a worker
process (`worker_handle`) and the pool of them (`worker_pool`); calls with failures classified and
crash reproducers (`client`, `reproducers`); the installed pass catalogue (`pass_catalogue`,
`pass_names`) and simulated compiler changes (`disabled_passes`).
"""
