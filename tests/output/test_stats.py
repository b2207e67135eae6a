"""stream_split.stats: outliers by median and MAD, the steady state after warm-up."""
from stream_split.stats import analyze

IT = "iteration"


def test_slow_steps_far_from_the_median_are_outliers():
    # The shape of torch_cpu/s1: steps #3 and #7 hold an eval pass (6x the others).
    durations = [998.4, 6140.0, 729.0, 632.9, 543.3, 6063.3]
    result = analyze(durations, [IT] * 6)
    assert result.outlier == [False, True, False, False, False, True]
    assert result.outlier_reason[1] == "7.1x median" and result.outlier_reason[0] is None


def test_small_jitter_in_a_regular_loop_is_no_outlier():
    # MAD is tiny here: the ratio rule keeps a 3 % slower step from being flagged.
    result = analyze([1000, 1001, 999, 1000, 1030, 1000], [IT] * 6)
    assert not any(result.outlier)


def test_idle_cycles_are_neither_outliers_nor_in_the_statistics():
    durations = [1000, 10, 1010, 990, 12, 1005, 5000]
    kinds = [IT, "idle", IT, IT, "idle", IT, IT]
    result = analyze(durations, kinds)
    assert result.outlier == [False, False, False, False, False, False, True]
    assert result.overall.count == 5 and result.overall.median_us == 1005
    assert result.steady_state == {"first": 0, "last": 6}


def test_warm_up_at_the_start_is_outside_the_steady_state():
    durations = [9000, 3000, 1000, 1020, 990, 1000, 1010, 980]
    result = analyze(durations, [IT] * 8)
    assert result.steady_state == {"first": 2, "last": 7}
    assert result.overall.warmup == 2


def test_a_slow_step_later_on_stays_in_the_steady_state():
    result = analyze([1000, 1000, 1000, 8000, 1000, 1000], [IT] * 6)
    assert result.steady_state == {"first": 0, "last": 5} and result.outlier[3]


def test_groups_are_judged_on_their_own():
    # Prefill steps are 10x decode steps: outliers of a mixed list, not of their own phase.
    durations = [10000, 1000, 1000, 1000, 10100, 1000, 1000, 9900, 1000]
    phases = ["prefill", "decode", "decode", "decode", "prefill", "decode", "decode",
              "prefill", "decode"]
    assert any(analyze(durations, [IT] * 9).outlier)
    grouped = analyze(durations, [IT] * 9, groups=phases)
    assert not any(grouped.outlier)
    assert grouped.groups["prefill"].median_us == 10000
    assert grouped.groups["decode"].median_us == 1000


def test_fewer_than_three_iterations_have_no_outliers():
    assert analyze([1000, 9000], [IT, IT]).outlier == [False, False]
    assert analyze([], []).steady_state is None
