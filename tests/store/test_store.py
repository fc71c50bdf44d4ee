"""The store on both backends (SQLite always; PostgreSQL when PLANNER_TEST_DATABASE_URL names one)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from planner.errors import InvalidSpecError
from planner.profiles import HardwareProfile, load_profiles
from planner.store import (
    LiveProfiles,
    Store,
    add_observation,
    delete_observation,
    get_observation,
    get_profile_version,
    list_observations,
    list_profile_versions,
    newest_profile_versions,
    open_store,
    profile_versions,
    profile_versions_state,
    save_profile_version,
)
from planner.store.models import Base

BUILTINS = load_profiles()


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    s = open_store(database_url)
    yield s
    s.close()


def _add(store: Store, owner: str = "alice", profile: str = "dgx-h100", step: float = 1.0) -> str:
    return add_observation(
        store,
        owner=owner,
        profile_id=profile,
        request={"model": {"preset": "gpt3-175b"}, "note": "\u00e9\u0000"},
        measured={"step_time_s": step},
        predicted={"step_time_s": 2 * step},
        planner_version="test",
        source={"kind": "log", "file": "run.log"},
    ).id


def _site(site: str = "site", efficiency: float = 0.7, base: str = "dgx-h100") -> HardwareProfile:
    profile = BUILTINS[base]
    assert profile.calibration is not None
    calibration = profile.calibration.model_copy(update={"gemm_peak_efficiency": efficiency})
    return profile.model_copy(update={"id": f"{base}@{site}", "calibration": calibration})


def test_migrated_schema_matches_the_models(store: Store) -> None:
    with store.engine.connect() as connection:
        diffs = compare_metadata(MigrationContext.configure(connection), Base.metadata)
    assert diffs == []


def test_an_observation_round_trips(store: Store) -> None:
    before = datetime.now(UTC)
    oid = _add(store, step=3.5)
    found = get_observation(store, oid)
    assert found is not None
    assert (found.owner, found.profile_id, found.planner_version) == ("alice", "dgx-h100", "test")
    assert found.request["note"] == "\u00e9\u0000" and found.measured == {"step_time_s": 3.5}
    assert found.predicted == {"step_time_s": 7.0} and found.source == {"kind": "log", "file": "run.log"}
    assert found.created_at.tzinfo is not None and before <= found.created_at <= datetime.now(UTC)
    assert str(uuid.UUID(oid)) == oid


def test_unknown_and_malformed_ids_name_nothing(store: Store) -> None:
    for oid in (str(uuid.uuid4()), "not-a-uuid", "x\u0000", "", "A" * 10_000):
        assert get_observation(store, oid) is None
        assert delete_observation(store, oid) is False


def test_delete_removes_one(store: Store) -> None:
    keep, gone = _add(store), _add(store)
    assert delete_observation(store, gone) is True
    assert delete_observation(store, gone) is False
    assert get_observation(store, gone) is None and get_observation(store, keep) is not None
    assert list_observations(store).total == 1


def test_list_filters_and_pages_oldest_first(store: Store) -> None:
    ids = [_add(store, owner=o, profile=p) for o in ("alice", "bob") for p in ("dgx-h100", "dgx-a100-80gb", "dgx-h100")]
    assert list_observations(store).total == 6
    assert list_observations(store, owner="bob").total == 3
    assert list_observations(store, profile="dgx-h100").total == 4
    assert list_observations(store, profile="dgx-h100", owner="alice").total == 2
    assert list_observations(store, profile="nothing").total == 0
    pages = [list_observations(store, limit=4, offset=o) for o in (0, 4, 8)]
    assert [len(p.items) for p in pages] == [4, 2, 0] and {p.total for p in pages} == {6}
    seen = [o.id for p in pages for o in p.items]
    assert sorted(seen) == sorted(ids)  # every one exactly once
    times = [o.created_at for p in pages for o in p.items]
    assert times == sorted(times)
    with pytest.raises(ValueError):
        list_observations(store, limit=-1)


def test_profile_versions_count_up_per_id(store: Store) -> None:
    first = save_profile_version(store, _site(efficiency=0.6), owner="alice", report={"rows": 3})
    second = save_profile_version(store, _site(efficiency=0.65), owner="bob")
    other = save_profile_version(store, _site("lab", base="dgx-a100-80gb"), owner="alice")
    assert (first.version, second.version, other.version) == (1, 2, 1)
    assert (first.base_id, first.site, first.report) == ("dgx-h100", "site", {"rows": 3})
    newest = get_profile_version(store, "dgx-h100@site")
    assert newest is not None and newest.version == 2 and newest.owner == "bob"
    assert newest.profile["calibration"]["gemm_peak_efficiency"] == 0.65
    given = get_profile_version(store, "dgx-h100@site", 1)
    assert given is not None and given.profile["calibration"]["gemm_peak_efficiency"] == 0.6
    assert get_profile_version(store, "dgx-h100@site", 3) is None and get_profile_version(store, "x@y") is None
    assert [(v.id, v.version) for v in list_profile_versions(store)] == [
        ("dgx-a100-80gb@lab", 1),
        ("dgx-h100@site", 1),
        ("dgx-h100@site", 2),
    ]
    assert [v.version for v in list_profile_versions(store, "dgx-h100@site")] == [1, 2]
    newest_ones = [(v.id, v.version) for v in newest_profile_versions(store)]
    assert newest_ones == [("dgx-a100-80gb@lab", 1), ("dgx-h100@site", 2)]


def test_a_stored_profile_is_a_site_profile(store: Store) -> None:
    with pytest.raises(InvalidSpecError, match="base@site"):
        save_profile_version(store, BUILTINS["dgx-h100"], owner="alice")


def test_concurrent_savers_get_distinct_versions(database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight stores save five versions of one id at once, each save on its first try: SQLite's write transactions
    and PostgreSQL's per-id advisory lock queue them, so none reads a version number another is about to take
    (optimistic retries alone let a saver lose the race every time, which once failed CI)."""
    monkeypatch.setattr(profile_versions, "_SAVE_TRIES", 1)
    stores = [open_store(database_url) for _ in range(8)]
    versions: list[int] = []
    lock = threading.Lock()

    def save(s: Store) -> None:
        for _ in range(5):
            v = save_profile_version(s, _site(), owner="alice").version
            with lock:
                versions.append(v)

    threads = [threading.Thread(target=save, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert sorted(versions) == list(range(1, 41))


def test_a_restart_loses_nothing(database_url: str) -> None:
    first = open_store(database_url)
    ids = {_add(first) for _ in range(5)}
    save_profile_version(first, _site(), owner="alice")
    first.close()
    again = open_store(database_url)
    assert {o.id for o in list_observations(again).items} == ids
    assert [v.version for v in list_profile_versions(again)] == [1]
    again.close()


def test_live_profiles_follow_new_versions(store: Store) -> None:
    live = LiveProfiles(BUILTINS, store)
    assert set(live.current()) == set(BUILTINS)
    assert live.current() is live.current()  # nothing saved: the same registry, not re-read
    save_profile_version(store, _site(efficiency=0.6), owner="alice")
    one = live.current()
    assert one["dgx-h100@site"].calibration is not None
    assert one["dgx-h100@site"].calibration.gemm_peak_efficiency == 0.6 and one.versions == {"dgx-h100@site": 1}
    save_profile_version(store, _site(efficiency=0.7), owner="alice")
    two = live.current()
    assert two.versions == {"dgx-h100@site": 2}
    assert two.fingerprint("dgx-h100@site") != one.fingerprint("dgx-h100@site")
    assert two.fingerprint("dgx-h100") == one.fingerprint("dgx-h100") != ""
    assert two.fingerprint("unknown") == two.fingerprint(None) == ""


def test_a_stored_profile_that_no_longer_validates_is_skipped(store: Store) -> None:
    save_profile_version(store, _site(), owner="alice")
    with store.write() as session:
        from sqlalchemy import update

        from planner.store.models import ProfileVersionRow

        session.execute(update(ProfileVersionRow).values(profile={"id": "dgx-h100@site", "unknown": 1}))
    registry = LiveProfiles(BUILTINS, store).current()
    assert "dgx-h100@site" not in registry and set(registry) == set(BUILTINS)


def test_state_changes_with_every_save(store: Store) -> None:
    assert profile_versions_state(store) == (0, None)
    save_profile_version(store, _site(), owner="alice")
    count, newest = profile_versions_state(store)
    assert count == 1 and newest is not None and newest.tzinfo is not None
