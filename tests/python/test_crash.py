"""A few dozen SIGKILLs of writing processes — appends, imports, parallel writes, gc (the
full run is `make crash`, 1,000): the store always opens at a committed version, every
version verifies and reads back exactly, gc leaves only named files, and appends go on."""

from harness import run


def test_kills_leave_committed_versions_only():
    counts = run(24, seed=1, quiet=True)
    assert counts["rounds"] == 24
    # The kills landed at different points: some before a commit, and the gc rounds.
    assert counts["killed_before_commit"] > 0 and counts["gc_killed"] == 6
    assert counts["imports_killed"] + counts["imports_completed"] == 3
    assert counts["parallel_killed"] + counts["parallel_completed"] == 3
    assert counts["stream_rounds"] == 3
