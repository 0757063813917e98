"""Families written with dm-haiku's own networks (`hk.nets.ResNet`, `hk.nets.MobileNetV1`,
`hk.nets.VectorQuantizerEMA`), mixed precision through haiku's jmp policies, optax training steps."""
