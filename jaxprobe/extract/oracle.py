"""A victim behind an explanation API: value, gradient, SmoothGrad and finite-difference queries, counted.

The threat model of Milli et al. (2019), "Model Reconstruction from Model Explanations", Section 2: the
attacker sends inputs and receives the model's output (a *membership* / prediction query) and/or the
gradient of the output with respect to the input (a raw saliency map, an *input-gradient* query).
SmoothGrad (Section 4) averages gradients over noisy copies of the input; finite differences
(Appendix C) build gradients out of value queries only.

Every answered input row is counted by kind, on the host, from concrete shapes:
``num_value_queries`` and ``num_gradient_queries``. Public query methods therefore refuse traced
inputs (inside ``jit``/``vmap`` a Python counter would count traces, not queries); the library's own
compiled loops (:func:`jaxprobe.extract.recover_relu`) use :meth:`Oracle._masked_values` and
:meth:`Oracle._masked_gradients`,
which answers only the rows a mask selects, returns the answered counts as arrays, and the host adds
them after the loop with :meth:`Oracle._record`. Rows a mask leaves out are never answered: their
results are replaced by zeros inside the oracle, so the caller cannot use them.
"""

from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from jaxprobe._inputs import as_float_array, check_int, check_number
from jaxprobe.engine.compiled import jit_bounded
from jaxprobe.types import Array

__all__ = ["Oracle"]

_OUTPUT_CHOICES = "None (the predicted class), a class index, or 'all' (the full Jacobian)"


class Oracle:
    """Query access to a victim model, with exact per-row query counts.

    Parameters
    ----------
    victim_fn:
        A JAX-traceable function of ONE input of shape ``(input_dim,)`` returning a scalar (a regression
        output, a logit or one probability) or a vector of ``num_outputs`` class scores (probabilities
        for a classifier: the default explanation is then the gradient of the predicted class's
        probability, as saliency APIs return).
    input_dim:
        d, the length of one input.

    Counters
    --------
    ``num_value_queries`` counts rows answered with f(x) (including the value queries that finite
    differences and SmoothGrad's caller never see: none for SmoothGrad, d or 2d per finite-difference
    gradient); ``num_gradient_queries`` counts rows answered with an explanation (a gradient, a
    SmoothGrad map, or a Jacobian: one per row). :meth:`reset_counts` sets both to zero.

    Example
    -------
    >>> oracle = Oracle(lambda x: jnp.sum(jnp.maximum(x, 0.0)), input_dim=3)
    >>> oracle.gradient(jnp.array([[1.0, -1.0, 2.0]]))
    Array([[1., 0., 1.]], dtype=float32)
    >>> oracle.num_gradient_queries
    1
    """

    def __init__(self, victim_fn: Callable[[Array], Array], input_dim: int):
        if not callable(victim_fn):
            raise TypeError(f"victim_fn must be callable on one input of shape (input_dim,), got "
                            f"{type(victim_fn).__name__}")
        self.input_dim = check_int(input_dim, "input_dim", minimum=1)
        try:
            shape = jax.eval_shape(victim_fn, jax.ShapeDtypeStruct((self.input_dim,), jnp.float32)).shape
        except Exception as error:  # the victim must be traceable on one input
            raise TypeError(f"victim_fn could not be traced on one input of shape ({self.input_dim},): "
                            f"{error}") from error
        if shape == () or shape == (1,):
            self.num_outputs = None
        elif len(shape) == 1:
            self.num_outputs = int(shape[0])
        else:
            raise ValueError(f"victim_fn must return a scalar or a vector of class scores, got shape {shape}")
        self._squeeze = shape == (1,)
        self.victim_fn = victim_fn
        self.num_value_queries = 0
        self.num_gradient_queries = 0
        self._values = jax.jit(jax.vmap(self._scores))
        self._gradients = jax.jit(jax.vmap(self._explain, in_axes=(0, None)), static_argnums=1)
        self._jacobians = jax.jit(jax.vmap(jax.jacrev(self._scores)))
        self._values_and_gradients = jax.jit(jax.vmap(jax.value_and_grad(self._scores)))

    # ------------------------------------------------------------------ pure, one input
    def _scores(self, x: Array) -> Array:
        out = self.victim_fn(x)
        return out.reshape(()) if self._squeeze else out

    def _explain(self, x: Array, output: int | None) -> Array:
        """Gradient of the scalar output, of class ``output``, or of the predicted class (``None``)."""
        if self.num_outputs is None:
            return jax.grad(self._scores)(x)
        if output is not None:
            return jax.grad(lambda z: self._scores(z)[output])(x)
        scores, pullback = jax.vjp(self._scores, x)
        onehot = jax.nn.one_hot(jnp.argmax(scores), self.num_outputs, dtype=scores.dtype)
        return pullback(onehot)[0]

    # ------------------------------------------------------------------ argument checks
    def _rows(self, x: Any, name: str = "x") -> Array:
        if isinstance(x, jax.core.Tracer):
            raise TypeError(f"{name}: Oracle queries are counted on the host and cannot be traced (called "
                            "inside jit/vmap/grad); query with concrete arrays outside compiled code")
        # An array, a DataFrame or a nested list of numbers; cast to the working dtype (float32 unless x64).
        array = as_float_array(x, name, shape=(None, self.input_dim), finite=False)
        if array.shape[0] == 0:
            raise ValueError(f"{name} must hold at least one row")
        if not np.all(np.isfinite(array)):
            raise ValueError(f"{name} contains NaN or infinite entries")
        return jnp.asarray(array, dtype=jnp.result_type(float))

    def _output(self, output: Any) -> int | str | None:
        if output is None:
            return None
        if self.num_outputs is None:
            raise ValueError(f"output must be None for a victim with a scalar output, got {output!r}")
        if output == "all":
            return "all"
        expected = f"output must be {_OUTPUT_CHOICES} with 0 <= index < {self.num_outputs}, got {output!r}"
        if isinstance(output, str):  # a name other than 'all': a wrong value, not a wrong type
            raise ValueError(expected)
        index = check_int(output, "output")  # a bool or a float such as 1.0: a TypeError
        if not 0 <= index < self.num_outputs:
            raise ValueError(expected)
        return index

    # ------------------------------------------------------------------ public queries
    def value(self, x: Any) -> Array:
        """Membership / prediction queries: f(x) for each row of ``x`` (n, d) → (n,) or (n, num_outputs)."""
        x = self._rows(x)
        self.num_value_queries += x.shape[0]
        return self._values(x)

    def gradient(self, x: Any, output: int | str | None = None) -> Array:
        """Input-gradient (raw saliency) queries, one per row of ``x`` (n, d).

        Returns (n, d): ∇f(x) for a scalar victim; for a classifier the gradient of the predicted class's
        score (``output=None``), of class ``output`` (an index), or the Jacobian (n, num_outputs, d) for
        ``output='all'`` (one gradient query per row).
        """
        x = self._rows(x)
        output = self._output(output)
        self.num_gradient_queries += x.shape[0]
        if output == "all":
            return self._jacobians(x)
        return self._gradients(x, output)

    def value_and_gradient(self, x: Any, output: int | str | None = None) -> tuple[Array, Array]:
        """Both answers for each row: one value query and one gradient query per row."""
        if self.num_outputs is None:          # one forward pass for both answers; counted as both
            x = self._rows(x)
            self.num_value_queries += x.shape[0]
            self.num_gradient_queries += x.shape[0]
            return self._values_and_gradients(x)
        values = self.value(x)
        return values, self.gradient(x, output)

    def smoothgrad(self, rng_key: Array, x: Any, *, num_samples: int = 50, noise_std: float = 0.15,
                   output: int | None = None) -> Array:
        """SmoothGrad (Smilkov et al. 2017; paper Section 4): (1/N) Σ_k ∇f(x + z_k), z_k ~ N(0, σ² I).

        One gradient query per row of ``x`` (n, d) → (n, d): the noisy copies are the API's business.
        For a classifier the class is the one predicted at the clean input x (or ``output``).
        """
        x = self._rows(x)
        num_samples = check_int(num_samples, "num_samples", minimum=1)
        noise_std = check_number(noise_std, "noise_std", minimum=0.0, exclusive_minimum=True)
        output = self._output(output)
        if output == "all":
            raise ValueError("smoothgrad returns one map per row: output must be None or a class index")
        self.num_gradient_queries += x.shape[0]
        return _smoothgrad(self, rng_key, x, num_samples, noise_std, output)

    def finite_difference_gradient(self, x: Any, *, step: float = 1e-6, scheme: str = "forward",
                                   output: int | None = None) -> Array:
        """Gradients from value queries only (paper Appendix C): (n, d) → (n, d).

        The step is h = step · max(1, ‖x‖∞), relative to the row's size.
        ``scheme='forward'``: (f(x + h e_j) − f(x)) / h, d + 1 value queries per row, exact for a
        piecewise-linear victim whenever no kink lies within h of x along a coordinate.
        ``scheme='central'``: (f(x + h e_j) − f(x − h e_j)) / 2h, 2d value queries per row.
        For a classifier the class is the predicted one at x (or ``output``). Counts value queries only.
        """
        x = self._rows(x)
        step = check_number(step, "step", minimum=0.0, exclusive_minimum=True)
        if scheme not in ("forward", "central"):
            raise ValueError(f"scheme must be 'forward' or 'central', got {scheme!r}")
        output = self._output(output)
        if output == "all":
            raise ValueError("finite_difference_gradient returns one gradient per row: output must be None "
                             "or a class index")
        n, d = x.shape
        self.num_value_queries += n * (d + 1 if scheme == "forward" else 2 * d)
        return _finite_difference(self, x, step, scheme, output)

    def reset_counts(self) -> None:
        """Set both query counters to zero."""
        self.num_value_queries = 0
        self.num_gradient_queries = 0

    # ------------------------------------------------------------------ library-internal, traceable
    def _masked_values(self, x: Array, mask: Array) -> tuple[Array, Array]:
        """Traceable value queries for compiled loops: x (n, d), mask (n,) bool → (values (n,), count).

        Only masked-in rows are answered (the others are zeros) and the victim runs on them only (gathered
        into the smallest of a few fixed-size buffers that holds them, see :func:`_on_live_rows`); the
        caller passes the count to :meth:`_record` once its loop has run. Scalar victims only.
        """
        values = _on_live_rows(lambda rows: jax.vmap(self._scores)(rows), (x,), mask)
        return jnp.where(mask, values, 0.0), jnp.sum(mask).astype(jnp.int32)

    def _masked_values_and_gradients(self, x: Array, mask: Array, finite_difference_step: float | None,
                                     step_scale: Array | None = None) -> tuple[Array, Array, Array, Array, Array]:
        """Traceable value and gradient queries of the masked-in rows of x (n, d) → (values (n,),
        gradients (n, d), trusted (n,) bool, num_values, num_gradients), evaluated on those rows only.

        With ``finite_difference_step`` the gradients are forward differences from the values, checked
        by one more value query per row (:func:`_verify_differences`): d + 2 value queries per row, no
        gradient query; ``trusted`` is False where a kink lay within a step (the gradient is then wrong).
        ``step_scale`` (n,) in (0, 1] shrinks each row's step (near close kinks). Exact gradients are
        always trusted."""
        step_scale = jnp.ones(x.shape[0], x.dtype) if step_scale is None else step_scale
        count = jnp.sum(mask).astype(jnp.int32)
        if finite_difference_step is None:
            def both(rows, scale):
                values, gradients = jax.vmap(jax.value_and_grad(self._scores))(rows)
                return values, gradients, jnp.ones(rows.shape[0], bool)
            num_values, num_gradients = count, count
        else:
            def both(rows, scale):
                values = jax.vmap(self._scores)(rows)
                gradients = _forward_differences(self._scores, rows, values, finite_difference_step, scale)
                trusted = _verify_differences(self._scores, rows, values, gradients, finite_difference_step, scale)
                return values, gradients, trusted
            num_values, num_gradients = (x.shape[1] + 2) * count, jnp.zeros((), jnp.int32)
        values, gradients, trusted = _on_live_rows(both, (x, step_scale), mask)
        return (jnp.where(mask, values, 0.0), jnp.where(mask[:, None], gradients, 0.0), trusted & mask,
                num_values, num_gradients)

    def _record(self, num_values: Any, num_gradients: Any) -> None:
        self.num_value_queries += int(num_values)
        self.num_gradient_queries += int(num_gradients)

    def __repr__(self) -> str:
        outputs = "scalar" if self.num_outputs is None else f"{self.num_outputs} outputs"
        return (f"Oracle(input_dim={self.input_dim}, {outputs}, value queries={self.num_value_queries}, "
                f"gradient queries={self.num_gradient_queries})")


def _bucket_sizes(n: int) -> list[int]:
    """Buffer sizes n, n/4, n/16, ... down to 64 to 256 rows: live rows are padded up to at most 4× their
    number, or to 256 (a batch that small costs little, and every size is one more compiled copy of the victim)."""
    sizes = [n]
    while sizes[-1] > 256:
        sizes.append(-(-sizes[-1] // 4))
    return sizes[::-1]


def _on_live_rows(fn: Callable[..., Any], args: tuple, mask: Array) -> Any:
    """fn(*rows) → arrays with leading axis m, run on the masked-in rows of ``args`` (arrays of n rows) only.

    The live rows are gathered (live first, stable order) into the smallest buffer of
    :func:`_bucket_sizes` that holds them, ``fn`` runs on that buffer, and the results are scattered
    back to n rows (rows outside the buffer are zeros; the caller masks the rest). No live row: no call.
    """
    n = mask.shape[0]
    sizes = _bucket_sizes(n)
    shapes = jax.eval_shape(fn, *args)
    order = jnp.argsort(~mask, stable=True)
    count = jnp.sum(mask)

    def nothing(*args):
        return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)

    def on(size):
        def branch(*args):
            rows = order[:size]
            out = fn(*(a[rows] for a in args))
            return jax.tree.map(lambda s, o: jnp.zeros(s.shape, s.dtype).at[rows].set(o), shapes, out)
        return branch

    branch = jnp.where(count == 0, 0, 1 + jnp.searchsorted(jnp.asarray(sizes), count))
    return jax.lax.switch(branch, [nothing] + [on(size) for size in sizes], *args)


def _forward_differences(scores: Callable[[Array], Array], x: Array, values: Array, step: float,
                         scale: Array | None = None) -> Array:
    """(f(x + h e_j) − f(x)) / h for every row and coordinate: x (n, d), values (n,) → (n, d);
    h = step · max(1, ‖x‖∞) · scale (scale (n,), default 1)."""
    d = x.shape[1]
    steps = step * jnp.maximum(1.0, jnp.max(jnp.abs(x), axis=1))          # relative to the row's size
    steps = steps if scale is None else steps * scale
    shifted = jax.vmap(lambda row, h: jax.vmap(scores)(row + h * jnp.eye(d, dtype=x.dtype)))(x, steps)
    return (shifted - values[:, None]) / steps[:, None]


def _verify_differences(scores: Callable[[Array], Array], x: Array, values: Array, gradients: Array,
                        step: float, scale: Array) -> Array:
    """One value query per row checks forward differences of a piecewise-linear f: (n,) bool.

    A kink within a step h of x along coordinate j makes entry j of the difference quotient wrong. The
    check compares f(x + 3h·r) (r a fixed ±1 direction) with f(x) + 3h·g·r: a wrong entry moves the
    prediction by 3h·|Δg_j|, far above the rounding of f (≈ 1e-16 of its terms) unless Δg_j is
    negligible. A kink between x and x + 3h·r fails the check too (a harmless false alarm).
    """
    d = x.shape[1]
    direction = jnp.asarray(np.where(np.random.default_rng(0).random(d) < 0.5, -1.0, 1.0), x.dtype)
    steps = 3.0 * step * jnp.maximum(1.0, jnp.max(jnp.abs(x), axis=1)) * scale
    probe = jax.vmap(scores)(x + steps[:, None] * direction)
    predicted = values + steps * (gradients @ direction)
    scale = jnp.abs(values) + jnp.abs(probe) + steps * jnp.sum(jnp.abs(gradients), axis=1)
    return jnp.abs(probe - predicted) <= 1e-10 * scale


@jit_bounded(static_argnames=("oracle", "num_samples", "output"))
def _smoothgrad(oracle: Oracle, rng_key: Array, x: Array, num_samples: int, noise_std: float,
                output: int | None) -> Array:
    keys = jax.random.split(rng_key, x.shape[0])

    def one(key, row):
        if oracle.num_outputs is not None and output is None:
            target = jnp.argmax(oracle._scores(row))
        else:
            target = output

        def explain(noisy):
            if oracle.num_outputs is None:
                return jax.grad(oracle._scores)(noisy)
            return jax.grad(lambda z: oracle._scores(z)[target])(noisy)

        noise = noise_std * jax.random.normal(key, (num_samples,) + row.shape, row.dtype)
        return jnp.mean(jax.vmap(explain)(row + noise), axis=0)

    return jax.vmap(one)(keys, x)


@jit_bounded(static_argnames=("oracle", "scheme", "output"))
def _finite_difference(oracle: Oracle, x: Array, step: float, scheme: str, output: int | None) -> Array:
    def one(row):
        scores = oracle._scores(row)
        if oracle.num_outputs is None:
            pick = lambda s: s  # noqa: E731
        else:
            target = jnp.argmax(scores) if output is None else output
            pick = lambda s: s[target]  # noqa: E731
        h = step * jnp.maximum(1.0, jnp.max(jnp.abs(row)))
        basis = h * jnp.eye(row.shape[0], dtype=row.dtype)
        plus = jax.vmap(lambda e: pick(oracle._scores(row + e)))(basis)
        if scheme == "forward":
            return (plus - pick(scores)) / h
        minus = jax.vmap(lambda e: pick(oracle._scores(row - e)))(basis)
        return (plus - minus) / (2 * h)

    return jax.vmap(one)(x)
