"""Families written with equinox (`eqx.nn`): the library kept out of training, only in `unseen`, so
that `unseen` measures model code no policy was trained or selected on."""
