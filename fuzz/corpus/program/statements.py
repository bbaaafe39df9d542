def f(x, w, i, z):
    """Every kind of statement."""
    y = softmax(x @ w, axis=-1)
    a, b = y[None, ..., 1:3], logsumexp(z, axis=(0, 2), keepdims=True)
    a += where(i > 2, 1, 2.5).sum()
    c = all_gather(x, ("data", "model"), axis=1, tiled=True)
    d = all_to_all(z, "data", 0, 2, tiled=True)
    e = ppermute(x, "model", [(0, 1), (1, 2), (2, 3), (3, 0)])
    return a, b, c.astype(jnp.int32), d, e * axis_index("model"), jnp.arange(3.0)
