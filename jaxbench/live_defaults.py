"""Defaults of live comparisons (:class:`jaxbench.interleave.Schedule`), calibration and ``run``.

Constants only, apart from the session, so that the command line shows them without importing
the session (numpy, scipy) at start-up.
"""

#: First look after 3 pairs, then a look after every pair, up to 30 pairs or 300 s of pairs a
#: case: seeded simulations with a pair spread of 0.028 (tests/test_sequential.py) call
#: unchanged code ``same`` in about 88 % of comparisons, and a 3 % slowdown ``slower`` in
#: about 99 %, at threshold 2 %.
DEFAULT_PAIRS = 3
DEFAULT_PAIRS_STEP = 1
DEFAULT_MAX_PAIRS = 30
DEFAULT_MAX_TIME_S = 300.0
DEFAULT_ROUNDS = 30
DEFAULT_CALLS_PER_BLOCK = 10
DEFAULT_WARMUP_ROUNDS = 3
DEFAULT_WARMUP_CALLS = 10
#: Pairs of each A/A comparison of ``jaxbench calibrate`` (one look each).
DEFAULT_CALIBRATION_PAIRS = 10
#: A/A comparisons of one ``jaxbench calibrate`` (:func:`jaxbench.calibrate.calibrate`).
DEFAULT_COMPARISONS = 4
#: ``jaxbench run --case-timeout``, seconds a case may take in its watched worker, preparing and
#: timing (:class:`jaxbench.supervised.Supervised`): a compile-heavy case of the full grid on a
#: CPU fits with room; 0 sets no limit.
DEFAULT_CASE_TIMEOUT_S = 1800.0
