"""Which JAX release made a case slower: the releases between two versions, judged live.

:mod:`~jaxbench.bisect.releases` lists the releases of both jax and jaxlib between GOOD and BAD;
:mod:`~jaxbench.bisect.search` finds every step with a ``sweep`` of every release or a ``binary``
search, given a judge; :mod:`~jaxbench.bisect.live` is the judge: live interleaved pairs of
each release's environment (:mod:`jaxbench.interleave`). ``jaxbench bisect`` is the command.
"""

from jaxbench.bisect.releases import releases_between
from jaxbench.bisect.search import STRATEGIES, Bisection, Boundary, Judgement, search

__all__ = ["STRATEGIES", "Bisection", "Boundary", "Judgement", "releases_between", "search"]
