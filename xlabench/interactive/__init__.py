"""MLGO's interactive protocol: an MLGO host orders XLA's passes (`xlabench interactive`), and a shipped
policy advises any compiler that speaks it (`xlabench advise`)."""
