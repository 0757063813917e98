"""Families written with flax: linen (`resnet`, `efficientnet`, `densenet`, `lm`) and nnx (`convnext`,
`transformer`). Layers are flax's own (`nn.Conv`, `nn.BatchNorm`, `nn.SelfAttention`, `nnx.Conv`, ...);
training steps use optax (`xlabench.models.training`)."""
