"""The probe module: a small JAX program whose full compile shows a release's CPU pipeline."""

from __future__ import annotations


def probe_module_text() -> str:
    """A small module with a while loop, a conditional, gather, scatter, a convolution and bf16."""
    import jax
    import jax.numpy as jnp

    def probe(x, indices, kernel):
        def body(carry):
            step, value = carry
            return step + 1, jnp.tanh(value) * 0.5

        _, x = jax.lax.while_loop(lambda carry: carry[0] < 3, body, (0, x))
        x = jax.lax.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: v - 1.0, x)
        gathered = x[indices]
        scattered = jnp.zeros_like(x).at[indices].add(gathered)
        image = scattered.reshape(1, 1, 4, 4).astype(jnp.bfloat16)
        convolved = jax.lax.conv(image, kernel.astype(jnp.bfloat16), (1, 1), "SAME")
        return convolved.astype(jnp.float32).sum() + scattered.sum()

    arguments = (
        jax.ShapeDtypeStruct((16,), jnp.float32),
        jax.ShapeDtypeStruct((4,), jnp.int32),
        jax.ShapeDtypeStruct((1, 1, 3, 3), jnp.float32),
    )
    return jax.jit(probe).lower(*arguments).compiler_ir("hlo").as_hlo_text()
