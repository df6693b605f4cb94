"""The fake cloud's journal (providers.fake.saved): a replay gives the live state after any sequence of
launches, terminations, restarts and compactions by several providers on one file; a torn last line is
skipped and cut off; a reader holding an offset into a compacted journal replays it; processes
launching and terminating at once through compactions lose nothing."""

from __future__ import annotations

import json
import multiprocessing
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from providers.fake import FakeProvider, saved
from providers.fake.shared import SharedFakeProvider
from provisioner.cloudprovider import Instance, NotFound
from testkit.builders.nodes import node_claim
from testkit.providers.harness_fake import fake_node_class


def shared(path: str) -> SharedFakeProvider:
    return SharedFakeProvider(state_path=path, cluster_name="c")


def create(fake: FakeProvider, name: str) -> Instance:
    types = [t for t in fake.instance_types(fake_node_class()) if t.name == "m5.large"]
    return fake.create(node_claim(name, options=["m5.large"]), types, fake_node_class())


def state(instances: list[Instance]) -> dict[str, dict[str, Any]]:
    """Instances by provider ID, as the journal keeps them."""
    return {i.provider_id: saved.dump_instance(i) for i in instances}


def lines(path: str) -> list[dict[str, Any]]:
    return saved.parse(Path(path).read_bytes(), path)


# A step: (which of three providers, what: launch / delete a claim, or restart that provider, which claim).
steps = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from(["launch", "delete", "restart"]), st.integers(0, 5)),
    max_size=40,
)


@settings(max_examples=60, deadline=None)
@given(steps, st.integers(0, 6))
def test_a_replay_of_the_journal_is_the_live_state_whatever_the_operations(
    ops: list[tuple[int, str, int]], floor: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        mp.setattr(saved, "COMPACT_FLOOR", floor)  # small: compactions happen within a few steps
        path = str(Path(tmp) / "cloud.json")
        fakes = [shared(path) for _ in range(3)]
        live: dict[str, str] = {}  # claim -> provider ID: the model
        launches: dict[str, int] = {}
        for who, what, n in ops:
            claim = f"claim-{n}"
            if what == "restart":
                fakes[who] = shared(path)
            elif what == "launch":
                launched = create(fakes[who], claim)
                if claim not in live:
                    launches[claim] = launches.get(claim, 0) + 1
                live[claim] = launched.provider_id
            elif claim in live:
                fakes[who].delete(live.pop(claim))
            else:
                with pytest.raises(NotFound):
                    fakes[who].delete(f"fake://nowhere/{claim}")
            replayed, counts = saved.load(path) if Path(path).exists() else ([], {})
            assert sorted(i.provider_id for i in replayed) == sorted(live.values())
            assert counts == launches
        for fake in [*fakes, shared(path)]:
            assert state(fake.list()) == state(saved.load(path)[0] if Path(path).exists() else [])
            assert fake.launches_by_claim == launches
        restarted = FakeProvider(state_path=path, cluster_name="c")
        assert sorted(i.provider_id for i in restarted.list()) == sorted(live.values())


def test_a_torn_last_line_is_skipped_on_replay_and_cut_off_by_the_next_launch(tmp_path: Path) -> None:
    path = str(tmp_path / "cloud.json")
    first = FakeProvider(state_path=path, cluster_name="c")
    kept = create(first, "claim-a")
    whole = Path(path).read_bytes()
    # The process is killed mid-append: all of a long launch's line but its end and newline.
    other = FakeProvider(cluster_name="c")
    other.cloud_labels = {f"label-{i}": "x" * 40 for i in range(40)}
    line = json.dumps(saved.launch(create(other, "claim-b"))).encode()
    Path(path).write_bytes(whole + line[:-2])

    restarted = FakeProvider(state_path=path, cluster_name="c")
    assert [i.provider_id for i in restarted.list()] == [kept.provider_id]
    assert saved.load(path)[1] == {"claim-a": 1}
    create(restarted, "claim-c")
    assert [r["op"] for r in lines(path)] == ["launch", "launch"], "the torn line is gone, the file whole"
    assert sorted(str(i.nodeclaim) for i in shared(path).list()) == ["claim-a", "claim-c"]


def test_a_reader_at_an_offset_into_a_compacted_journal_replays_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "cloud.json")
    monkeypatch.setattr(saved, "COMPACT_FLOOR", 10**9)  # no compaction until the end
    a, b = shared(path), shared(path)
    launched = [create(a, "claim-0")]
    assert len(b.list()) == 1  # b has read one line: its offset is that line's end
    offset = Path(path).stat().st_size
    launched += [create(a, f"claim-{i}") for i in range(1, 30)]
    for instance in launched[:28]:
        a.delete(instance.provider_id)
    monkeypatch.setattr(saved, "COMPACT_FLOOR", 0)
    a.delete(launched[28].provider_id)  # this write compacts
    records = lines(path)
    assert [r["op"] for r in records] == ["snapshot"]
    assert Path(path).stat().st_size > offset, "b's old offset falls inside the snapshot's line"

    assert sorted(str(i.nodeclaim) for i in b.list()) == ["claim-29"]
    assert b.launches_by_claim == {f"claim-{i}": 1 for i in range(30)}
    create(b, "claim-30")
    assert sorted(str(i.nodeclaim) for i in a.list()) == ["claim-29", "claim-30"]


def test_a_compaction_killed_before_its_rename_leaves_the_journal_whole(tmp_path: Path) -> None:
    path = str(tmp_path / "cloud.json")
    a, b = shared(path), shared(path)
    create(a, "claim-a")
    assert len(b.list()) == 1
    # The epoch was raised, then the process died: no snapshot renamed over the journal.
    journal = saved.Journal(path)
    with journal.locked():
        journal.read()
        Path(f"{path}.tmp").write_text("")
        saved._write_all(journal._held(), f"{1:0{saved.EPOCH_WIDTH}d}\n".encode(), 0)
    create(a, "claim-b")
    assert sorted(str(i.nodeclaim) for i in b.list()) == ["claim-a", "claim-b"]
    assert b.launches_by_claim == {"claim-a": 1, "claim-b": 1}


def test_a_line_that_is_not_a_record_is_named_with_its_file(tmp_path: Path) -> None:
    path = tmp_path / "cloud.json"
    path.write_text(
        '{"op": "launch", "instance": {"provider_id": "fake://z/a", "nodeclaim": "a"}}\nnot json\n'
    )
    with pytest.raises(ValueError, match=r"cloud\.json: line at byte \d+"):
        FakeProvider(state_path=str(path))


def _churn(path: str, who: int) -> None:
    """Launch five claims 20 times over, terminating each but the last time."""
    fake = shared(path)
    for j in range(100):
        launched = create(fake, f"p{who}-{j % 5}")
        if j < 95:
            fake.delete(launched.provider_id)


def test_processes_launching_and_terminating_through_compactions_lose_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(saved, "COMPACT_FLOOR", 4)  # inherited by the forked processes: many compactions
    path = str(tmp_path / "cloud.json")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_churn, args=(path, i)) for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0, f"process {p.pid} exited {p.exitcode} (None: still running after 120 s)"
    claims = [f"p{w}-{k}" for w in range(3) for k in range(5)]
    fake = shared(path)
    assert sorted(str(i.nodeclaim) for i in fake.list()) == claims
    assert fake.launches_by_claim == dict.fromkeys(claims, 20)
    assert int(Path(f"{path}.lock").read_text()) > 1, "the journal was compacted, more than once"
