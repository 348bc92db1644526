"""Defaults of live comparisons (:class:`jaxbench.interleave.Schedule`) and of calibration.

Constants only, apart from the session, so that the command line shows them without importing
the session (numpy, scipy) at start-up.
"""

DEFAULT_PAIRS = 10
DEFAULT_PAIRS_STEP = 5
DEFAULT_MAX_PAIRS = 20
DEFAULT_ROUNDS = 30
DEFAULT_CALLS_PER_BLOCK = 10
DEFAULT_WARMUP_ROUNDS = 3
DEFAULT_WARMUP_CALLS = 10
#: A/A comparisons of one ``jaxbench calibrate`` (:func:`jaxbench.calibrate.calibrate`).
DEFAULT_COMPARISONS = 4
