"""A user's abstract domain with a setting of its own, registered by name when imported
(tests/test_domains_by_name.py): it touches no library file.

``widened`` is the sound interval domain with every affine map's box widened around its centre
by ``factor`` (a setting, default 2): ``[lo − s, hi + s]`` with ``s = (hi − lo)·(factor − 1)/2``.
Still sound for factor ≥ 1: the box contains the sound interval box, in floating point too
(``s ≥ 0`` and rounding is monotone, so ``fl(lo − s) ≤ lo`` and ``fl(hi + s) ≥ hi``). The
certification margins (:meth:`margin_lower_bounds`, which bounds through :meth:`linear`) are
widened too, so it certifies at most what the interval domain does; factor 1 is the interval
domain exactly.
"""

import dataclasses

from arc_jax import interval as iv
from arc_jax.domains import register_domain
from arc_jax.settings import Setting, Settings

SETTINGS = Settings("widened", {
    "factor": Setting(2.0, "each affine map's box widened around its centre by this factor "
                      "(>= 1)")})


@dataclasses.dataclass(frozen=True)
class WidenedDomain(iv.IntervalDomain):
  """The sound intervals, each affine map's box widened by ``factor`` (module docstring)."""

  factor: float = 2.0

  def linear(self, x, kernel, bias=None):
    y = super().linear(x, kernel, bias)
    if self.factor == 1.0 or not iv.is_interval(y):
      return y  # factor 1: the interval rule itself (no 0 · ∞ at unbounded ends)
    spread = (y.hi - y.lo) * ((self.factor - 1.0) / 2.0)
    return iv.Interval(y.lo - spread, y.hi + spread)


def make(settings) -> WidenedDomain:
  if not settings.factor >= 1.0:
    raise ValueError(f"widened.factor={settings.factor}: the widening factor must be >= 1 "
                     "(below 1 the box would not contain the interval box).")
  return WidenedDomain(factor=settings.factor)


ENTRY = register_domain("widened", "sound intervals, each affine box widened by a factor "
                        "(a test's toy domain)", make, SETTINGS)
