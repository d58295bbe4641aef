import recoup.timekeeping as timekeeping


def test_the_time_core_exports_exactly_its_public_surface() -> None:
    # Other packages import these names; adding or dropping one is a deliberate API change.
    assert timekeeping.__all__ == sorted(timekeeping.__all__)
    assert set(timekeeping.__all__) == {
        "Anchor",
        "BusinessCalendar",
        "Clock",
        "DriftedCharge",
        "Occurrence",
        "OffsetClock",
        "RecoveredAnchor",
        "SystemClock",
        "Unrecovered",
        "VirtualClock",
        "anchor_from",
        "cron_between",
        "cron_next",
        "first_after",
        "first_at_or_after",
        "follows_clock",
        "format_local",
        "format_utc",
        "is_ambiguous",
        "is_in_gap",
        "iter_cron",
        "iter_occurrences",
        "occurrence",
        "occurrence_at",
        "occurrences_between",
        "parse_instant",
        "parse_weekend",
        "reads_wall_time",
        "recover_anchor",
        "require_aware",
        "resolve_local",
        "start_of_local_day",
        "to_local",
        "validate_cron",
        "zone",
    }
    assert all(hasattr(timekeeping, name) for name in timekeeping.__all__)
