"""jaxbench.analysis.plots: log-space violins, ECDFs, compile bars, forward-mode crossover."""

import numpy as np
import pytest
import seaborn as sns
from analysis_data import VERSIONS, forward_records, lognormal, record, write
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from jaxbench import analysis
from jaxbench.analysis import plots

UNITS = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9}


def frame_of(tmp_path, records):
    write(tmp_path / "run.jsonl", records)
    frame, problems = analysis.load_results(tmp_path)
    assert problems == []
    return frame


@pytest.fixture
def wide_samples(tmp_path):
    """Latencies spread over decades (lognormal, sigma 1.5): a linear-space KDE goes below 0."""
    recs = [record(v, lognormal(1e-3, 300, seed=i, sigma=1.5)) for i, v in enumerate(VERSIONS)]
    return analysis.steady_state_samples(frame_of(tmp_path, recs[::-1]))


def violin_vertices_y(ax):
    bodies = [c for c in ax.collections if isinstance(c, PolyCollection)]
    assert bodies, "no violin bodies drawn"
    return np.concatenate([p.vertices[:, 1] for c in bodies for p in c.get_paths()])


def seconds_of(label):
    """``"2 ms"`` -> 0.002; fails on a label that is not a number of seconds."""
    number, unit = label.split(" ")
    return float(number) * UNITS[unit]


def labelled_in_seconds(ticks):
    """Every label reads as its tick's value in seconds, to the 3 digits shown."""
    return all(seconds_of(label) == pytest.approx(v, rel=5e-3) for v, label in ticks)


def visible_ticks(axis):
    """``(value, label)`` of the labelled major ticks within the axis' view limits."""
    lo, hi = sorted(axis.get_view_interval())
    ticks = zip(axis.get_majorticklocs(), axis.get_majorticklabels(), strict=True)
    return [(v, t.get_text()) for v, t in ticks if lo <= v <= hi and t.get_text()]


def test_log_scale_violin_has_no_vertex_at_or_below_zero_seconds(wide_samples):
    ax = plots.latency_violins(wide_samples)
    assert ax.get_yscale() == "log"
    seconds = violin_vertices_y(ax)  # y data are seconds, on a log axis
    assert (seconds > 0).all()
    # The density lives in log space: the violins span the samples' decades, not down to 0.
    latency = wide_samples["latency_s"]
    assert latency.min() / 100 < seconds.min() and seconds.max() < latency.max() * 100
    assert latency.median() / 3 < np.median(seconds) < latency.median() * 3
    assert [t.get_text() for t in ax.get_xticklabels()] == VERSIONS
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert any(lbl.endswith(("ms", "µs")) for lbl in labels)


def test_a_linear_space_violin_would_fail_that_check(wide_samples):
    # The check above can fail: seaborn's default violin of raw seconds reaches below 0.
    ax = Figure().add_subplot()
    sns.violinplot(data=wide_samples, x="version", y="latency_s", ax=ax)
    assert (violin_vertices_y(ax) <= 0).any()


def test_box_plot_is_in_log_space_too(wide_samples):
    ax = plots.latency_violins(wide_samples, kind="box")
    assert ax.get_yscale() == "log"
    lo, hi = ax.get_ylim()
    latency = wide_samples["latency_s"]
    assert 0 < lo <= latency.min() and latency.max() <= hi  # seconds, every record drawn
    assert labelled_in_seconds(visible_ticks(ax.yaxis))


@pytest.mark.parametrize(
    ("sigma", "mantissas"),
    [(1.5, {1}), (0.5, {1, 2, 5}), (0.3, {1, 2, 5})],
    ids=["over-two-decades", "two-decades", "one-decade"],
)
def test_latency_ticks_are_one_two_five_in_seconds_or_decades_beyond_two(
    tmp_path, sigma, mantissas
):
    recs = [record(v, lognormal(2e-4, 300, seed=i, sigma=sigma)) for i, v in enumerate(VERSIONS)]
    samples = analysis.steady_state_samples(frame_of(tmp_path, recs))
    for ax, axis in (
        (plots.latency_violins(samples), "yaxis"),
        (plots.latency_ecdf(samples), "xaxis"),
    ):
        ticks = visible_ticks(getattr(ax, axis))
        assert len(ticks) >= 3
        exponents = np.floor(np.log10([v for v, _ in ticks]))
        assert {
            round(v / 10**e, 6) for (v, _), e in zip(ticks, exponents, strict=True)
        } == mantissas
        assert labelled_in_seconds(ticks)
        assert not any(t.get_text() for t in getattr(ax, axis).get_minorticklabels())


def test_plots_refuse_to_pool_conditions(tmp_path):
    recs = [record("0.4.30"), record("0.4.30", env={"device_kind": "TPU v5e"})]
    samples = analysis.steady_state_samples(frame_of(tmp_path, recs))
    with pytest.raises(ValueError, match="condition"):
        plots.latency_violins(samples)
    with pytest.raises(ValueError, match="condition"):
        plots.latency_ecdf(samples)
    with pytest.raises(ValueError, match="kind"):
        plots.latency_violins(samples[samples["device_kind"] == "cpu"], kind="swarm")


def test_ecdf_has_one_curve_per_version_on_a_log_axis(wide_samples):
    ax = plots.latency_ecdf(wide_samples)
    assert ax.get_xscale() == "log"
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert len(ticks) >= 2 and all(t.endswith(("s", "ms", "µs", "ns")) for t in ticks)
    assert not any(t.get_text() for t in ax.xaxis.get_minorticklabels())
    assert len(ax.lines) == len(VERSIONS)
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == VERSIONS


def test_a_version_not_recorded_is_drawn_and_named(tmp_path):
    """asv's ``existing`` environments record no JAX version; seaborn failed on it with
    ``'NoneType' object is not iterable``."""
    recs = [record(VERSIONS[0], lognormal(1e-3, 50, seed=i), run_id=f"r{i}", env={"jax": None})
            for i in range(2)]  # fmt: skip
    write(tmp_path / "run.jsonl", recs)
    frame, problems = analysis.load_results(tmp_path)
    assert "env.jax not recorded" in str(problems)  # kept, and named on loading
    samples = analysis.steady_state_samples(frame)
    assert samples["version"].isna().any()
    ax = plots.latency_ecdf(samples)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["(not recorded)"]
    ax = plots.latency_violins(samples)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["(not recorded)"]


def test_compile_bars_one_bar_per_version_at_the_median(tmp_path):
    recs = [record(v, compile_s=c) for v, c in (("0.4.10", 2.0), ("0.4.9", 1.0), ("0.4.9", 3.0))]
    compiles = analysis.compile_times(frame_of(tmp_path, recs))
    ax = plots.compile_bars(compiles)
    heights = [p.get_height() for p in ax.patches]
    assert heights == [2.0, 2.0]  # 0.4.9: median of 1 and 3; 0.4.10: 2
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.4.9", "0.4.10"]


def test_forward_crossover_marks_the_crossover_and_plots_held_memory(tmp_path):
    frame = frame_of(tmp_path, forward_records(ks=(1, 2, 8, 32)))
    fig = plots.forward_crossover(frame)
    ax_t, ax_m = fig.axes[:2]
    assert ax_t.get_xscale() == ax_t.get_yscale() == "log"
    k_x = analysis.crossover_k(analysis.forward_table(frame))
    marks = [ln for ln in ax_t.lines if len(set(ln.get_xdata())) == 1]
    assert len(marks) == 1 and marks[0].get_xdata()[0] == pytest.approx(k_x)
    held = {tuple(ln.get_ydata()) for ln in ax_m.lines if len(ln.get_ydata()) == 4}
    assert (1.0, 1.0, 1.0, 1.0) in held and (0.0, 0.0, 0.0, 0.0) in held
    # One legend, and it covers neither the crossover's note nor any plotted point.
    fig.canvas.draw()
    (note,) = ax_t.texts
    legend = ax_t.get_legend().get_window_extent()
    assert ax_m.get_legend() is None
    assert not legend.overlaps(note.get_window_extent())
    assert not legend.overlaps(ax_t.get_window_extent())


def test_forward_crossover_draws_into_given_axes(tmp_path):
    frame = frame_of(tmp_path, forward_records(ks=(1, 2, 8, 32)))
    fig = Figure()
    axes = fig.subplots(1, 2)
    assert plots.forward_crossover(frame, axes=tuple(axes)) is fig
    assert len(fig.axes) == 2 and "jax 0.4.30" in axes[0].get_title()
    assert axes[0].get_xscale() == "log" and axes[1].lines


def test_narrow_latency_range_still_gets_two_ticks(tmp_path):
    recs = [record(v, lognormal(1.3e-3, 100, seed=i, sigma=0.02)) for i, v in enumerate(VERSIONS)]
    samples = analysis.steady_state_samples(frame_of(tmp_path, recs))
    for ax, axis in (
        (plots.latency_violins(samples), "yaxis"),
        (plots.latency_ecdf(samples), "xaxis"),
    ):
        ticks = visible_ticks(getattr(ax, axis))
        assert len(ticks) >= 2 and labelled_in_seconds(ticks)


def test_forward_crossover_refuses_two_versions(tmp_path):
    frame = frame_of(tmp_path, forward_records("0.4.30") + forward_records("0.4.31"))
    with pytest.raises(ValueError, match="version"):
        plots.forward_crossover(frame)


def test_the_compile_figure_is_the_same_each_time_and_leaves_numpys_generator_alone(tmp_path):
    runs = (("0.4.9", 1.0), ("0.4.9", 3.0), ("0.4.10", 2.0))
    recs = [record(v, compile_s=c, run_id=f"{v}-{i}") for i, (v, c) in enumerate(runs)]
    compiles = analysis.compile_times(frame_of(tmp_path, recs))

    def dots() -> list[list[float]]:
        ax = plots.compile_bars(compiles)
        return [c.get_offsets().tolist() for c in ax.collections]

    np.random.seed(1)
    untouched = np.random.random()
    np.random.seed(1)
    first = dots()
    assert np.random.random() == untouched  # the generator goes on as if nothing was drawn
    np.random.seed(2)
    assert dots() == first  # and the dots' jitter does not depend on its state
