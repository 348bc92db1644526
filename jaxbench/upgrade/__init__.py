"""``jaxbench review``: the upgrade review of two JAX versions, from screening to report.

Screen every selected case with recorded runs, several processes a side, alternating in time
(:mod:`.screen`); confirm each case the recorded runs did not settle as ``same`` with live
interleaved process pairs (:mod:`.confirm`); explain each confirmed change from the programs the
records saved; check numerical drift per side; write the report. Everything lands in one folder
as it is measured, and a second run reuses what is there.
"""
