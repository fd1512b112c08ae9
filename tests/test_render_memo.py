"""A target's lines are kept and replayed on its next scrape where their input stood still (exporter.common.exposition):
what a scrape serves that way must be, byte for byte, what rendering every sample afresh serves, whatever changed on
the server in between."""

from __future__ import annotations

import time

import pytest
from helpers import make_app
from servers import ENGINES, start_redis

from exporter.common.exposition import MEMO_ENTRIES, TargetRendering, TextFamilySet, encode_text
from exporter.common.families import FamilySet
from exporter.redis.info_metrics import _WHOLE
from exporter.redis.resp import RespFailure
from exporter.service.collectors.redis import RedisCollector
from exporter.service.targets import MAX_REPLAYING_TARGETS


class CountingSet(TextFamilySet):
    """Counts the lines replayed."""

    replayed = 0

    def replay(self, memo, key, source):
        kept = super().replay(memo, key, source)
        if kept is not None:
            CountingSet.replayed += len(kept[1]) // 3
        return kept


class SectionCounts(TextFamilySet):
    """Counts the fields a section's replay rendered anew, and the sections replayed whole."""

    rendered = 0
    whole = 0

    def replay_each(self, memo, inputs, render):
        def counted(key, source):
            SectionCounts.rendered += 1
            render(key, source)

        return super().replay_each(memo, inputs, counted)

    def replay(self, memo, key, source):
        kept = super().replay(memo, key, source)
        if kept is not None and key is _WHOLE:
            SectionCounts.whole += 1
        return kept


def served(app, target, result, out: FamilySet) -> None:
    target.node.scrape = lambda deadline: result  # the same reply for both renderings
    RedisCollector([target], app.pool, time.monotonic() + 5).write(out)


def scrape(target):
    """A real scrape of the server as it is now."""
    target.node.__dict__.pop("scrape", None)
    return target.node.scrape(time.monotonic() + 5)


def compare(app, target, drop_instance: bool) -> None:
    result = scrape(target)
    for _ in range(2):  # the second rendering of the same reply replays nearly every line
        replayed = TextFamilySet(drop_instance=drop_instance) if _ == 0 else CountingSet(drop_instance=drop_instance)
        served(app, target, result, replayed)
        fresh = FamilySet()
        served(app, target, result, fresh)
        assert replayed.encode().decode() == encode_text(fresh.families(), drop_instance=drop_instance).decode()


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_replayed_lines_equal_fresh_rendering_as_the_server_changes(engine):
    server = start_redis(engine=engine)
    app = make_app({"targets": [{"name": "memo", "addr": server.addr}]})
    try:
        target = app.targets.on_metrics()[0]
        client, other_db = server.client(), server.client(db=3)
        steps = [
            lambda: None,
            lambda: client.set("k", "v"),
            lambda: [client.lpush("l", i) for i in range(50)],
            lambda: client.config_set("maxmemory", "64mb"),
            lambda: other_db.set("in-db-3", "v", ex=100),  # a second database, with keys that expire
            lambda: client.config_set("client-output-buffer-limit", "normal 1mb 512kb 10"),
            lambda: client.hset("h", mapping={"a": 1, "b": 2}),
            lambda: client.execute_command("CONFIG", "RESETSTAT"),  # commandstats and latencystats emptied
            other_db.flushdb,
        ]
        CountingSet.replayed = 0
        for step in steps:
            step()
            for drop_instance in (False, True):
                compare(app, target, drop_instance)
        assert CountingSet.replayed > 100 * len(steps)  # not vacuous: most lines were replayed
    finally:
        app.close()
        server.stop()


def test_fields_that_stand_still_are_replayed_one_by_one_then_their_section_whole(plain_redis):
    """The first rendering renders every field; the second replays each (none moved: the section's lines are kept as
    one); the third replays each plain section whole. A section with a field that moved is not kept whole."""
    app = make_app({"targets": [{"name": "memo", "addr": plain_redis.addr}]})
    try:
        target = app.targets.on_metrics()[0]
        result = scrape(target)
        counts = []
        for _ in range(3):
            SectionCounts.rendered = SectionCounts.whole = 0
            served(app, target, result, SectionCounts())
            counts.append((SectionCounts.rendered, SectionCounts.whole))
        plain = [name for name in result.parsed.sections if name in ("server", "clients", "memory", "stats", "cpu")]
        assert counts[0][0] > 100
        assert counts[0][1] == 0
        assert counts[1] == (0, 0)
        assert counts[2][0] == 0
        assert counts[2][1] >= len(plain) == 5
        moved = scrape(target)  # a new reply: the uptime, the CPU and the commands' counters moved
        SectionCounts.rendered = SectionCounts.whole = 0
        served(app, target, moved, SectionCounts())
        assert 0 < SectionCounts.rendered < 100
        SectionCounts.rendered = SectionCounts.whole = 0
        served(app, target, moved, SectionCounts())  # the same reply again: the moved sections one by one, not whole
        assert SectionCounts.rendered == 0
        assert SectionCounts.whole < counts[2][1]
    finally:
        app.close()


def test_a_restarted_server_serves_its_new_values():
    server = start_redis()
    app = make_app({"targets": [{"name": "restarted", "addr": server.addr}]})
    try:
        target = app.targets.on_metrics()[0]
        compare(app, target, False)
        old_run_id = server.info()["run_id"]
        server.stop()
        server.start()
        with pytest.raises(RespFailure, match=r"closed|lost"):  # the kept connection is gone: the next scrape reconnects
            scrape(target)
        compare(app, target, False)
        out = TextFamilySet()
        served(app, target, scrape(target), out)
        text = out.encode().decode()
        assert f'run_id="{server.info()["run_id"]}"' in text
        assert old_run_id not in text
    finally:
        app.close()
        server.stop()


def test_replayed_lines_stay_true_after_many_other_targets_were_rendered():
    """Each target keeps its own memo: rendering 40 other targets first changes nothing of what a target replays."""
    servers = [start_redis() for _ in range(2)]
    targets = [{"name": f"node-{i}", "addr": servers[i % 2].addr} for i in range(40)]
    app = make_app({"targets": [{"name": "memo", "addr": servers[0].addr}, *targets]})
    try:
        every = app.targets.on_metrics()
        for target in every[1:]:
            served(app, target, scrape(target), TextFamilySet())
        CountingSet.replayed = 0
        servers[0].client().set("changed", "1")
        compare(app, every[0], False)
        assert CountingSet.replayed > 100
        replaying, fresh = every[:MAX_REPLAYING_TARGETS], every[MAX_REPLAYING_TARGETS:]
        assert all(len(target.rendering.memos[("text", False)]) > 100 for target in replaying)  # each kept its own
        assert all(target.rendering.memos is None for target in fresh)  # past the bound: rendered afresh, and the same
        CountingSet.replayed = 0
        compare(app, fresh[0], False)
        assert CountingSet.replayed == 0
    finally:
        app.close()
        for server in servers:
            server.stop()


@pytest.mark.unit
def test_a_memo_is_bounded_by_inputs_and_used_by_one_render_at_a_time():
    rendering = TargetRendering("node")
    out = TextFamilySet()
    with out.rendering(rendering):
        part = out.memo("server")
        assert part is not None
        for i in range(MEMO_ENTRIES):
            assert out.replay(part, f"field{i}", "1") is None
            with out.recording(part, f"field{i}", "1"):
                out.add("redis_x", "gauge", "X.", {}, 1.0)
        assert len(part) == MEMO_ENTRIES
        assert out.memo("server") == {}  # a server that makes up field names empties its part
        other = TextFamilySet()
        with other.rendering(rendering):
            assert other.memo("server") is None  # taken by the render under way: this one renders afresh
    with TextFamilySet().rendering(rendering):
        pass
    assert rendering.memos[("text", False)].claim()  # released after each render
    rendering.memos[("text", False)].release()


@pytest.mark.unit
def test_a_block_that_raises_records_nothing():
    rendering = TargetRendering("node")
    out = TextFamilySet()
    with out.rendering(rendering):
        part = out.memo("server")

        def half_rendered() -> None:
            with out.recording(part, "field", "1"):
                out.add("redis_x", "gauge", "X.", {}, 1.0)
                raise ValueError("half rendered")

        with pytest.raises(ValueError, match="half"):
            half_rendered()
        assert part == {}
        out.add("redis_y", "gauge", "Y.", {}, 1.0)  # not recorded: no recording is open
        assert part == {}


@pytest.mark.unit
def test_targets_that_go_give_their_memo_back(monkeypatch):
    """At most MAX_REPLAYING_TARGETS targets keep rendered lines; an evicted /scrape target's memo goes to the next one."""
    from exporter.service import targets as targets_module

    monkeypatch.setattr(targets_module, "MAX_REPLAYING_TARGETS", 2)
    monkeypatch.setattr(targets_module, "MAX_AD_HOC_NODES", 2)
    app = make_app({"redis": {"addr": ""}, "scrape": {"allow": [{"hosts": ["127.0.0.1"]}]}})
    try:
        first, second, third = (app.targets.resolve(f"redis://127.0.0.1:{port}") for port in (1, 2, 3))  # nothing is connected
        assert first.rendering.memos is not None
        assert second.rendering.memos is not None
        assert third.rendering.memos is not None  # the first was evicted for it, and gave its memo back
        assert app.targets.every() == [second, third]
        fourth = app.targets.resolve("redis://127.0.0.1:4")
        assert fourth.rendering.memos is not None
    finally:
        app.close()
