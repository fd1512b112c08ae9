"""Probing watched keys and streams on one connection, after INFO and within what is left of the deadline.

No error reply is ever provoked: a key's type and size (and a stream's XINFO) are read by one small read-only
script per key, which looks at the type first, atomically, so a key that vanishes or changes type between SCAN and
the probe is reported as it is then. Per-key scripts are pipelined; SCAN runs in batches of ``batch_size`` under
a key budget, and a pattern cut short by the budget or the deadline says so instead of serving a partial count.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from .keys import MAX_VALUE_BYTES, KeyProbeResult, KeyProbes, KeyReading, KeySpec, ScanReading, StreamReading, as_text, pairs
from .resp import ErrorReply, RespConnection, RespFailure

PIPELINE = 500  # per-key scripts per round trip

# KEYS[1]; ARGV[1]: the longest string value returned; ARGV[2]: "1" where MEMORY USAGE exists (Redis 4+).
# Returns {type, size, value or false, memory or false}; a HyperLogLog says "hll" and its size comes from PFCOUNT.
KEY_SCRIPT = """
local k = KEYS[1]
local t = redis.call('TYPE', k)['ok']
if t == 'none' then return {t, 0, false, false} end
local memory = false
if ARGV[2] == '1' then memory = redis.call('MEMORY', 'USAGE', k) end
local size, value = 0, false
if t == 'string' then
  size = redis.call('STRLEN', k)
  if size >= 4 and redis.call('GETRANGE', k, 0, 3) == 'HYLL' then return {'hll', 0, false, memory} end
  if size <= tonumber(ARGV[1]) then value = redis.call('GET', k) end
elseif t == 'list' then size = redis.call('LLEN', k)
elseif t == 'set' then size = redis.call('SCARD', k)
elseif t == 'zset' then size = redis.call('ZCARD', k)
elseif t == 'hash' then size = redis.call('HLEN', k)
elseif t == 'stream' then size = redis.call('XLEN', k)
end
return {t, size, value, memory}
"""

# KEYS[1]; ARGV[1]: "1" to list each group's consumers. False when the key is not a stream.
STREAM_SCRIPT = """
local k = KEYS[1]
if redis.call('TYPE', k)['ok'] ~= 'stream' then return false end
local groups = redis.call('XINFO', 'GROUPS', k)
local consumers = {}
if ARGV[1] == '1' then
  for i, g in ipairs(groups) do
    local name = nil
    for j = 1, #g, 2 do if g[j] == 'name' then name = g[j + 1] end end
    consumers[i] = redis.call('XINFO', 'CONSUMERS', k, name)
  end
end
return {redis.call('XINFO', 'STREAM', k), groups, consumers}
"""


class _Budget(Exception):
    """The deadline came: stop probing, keep what was read."""


class KeyProber:
    """One scrape's probes of one node. ``owns(key)``: whether this node serves the key (cluster mode)."""

    def __init__(
        self,
        conn: RespConnection,
        probes: KeyProbes,
        deadline: float,
        *,
        cluster: bool,
        owns: Callable[[str], bool],
        current_db: int,
        memory_usage: bool,
    ) -> None:
        self.conn = conn
        self.probes = probes
        self.deadline = deadline
        self.cluster = cluster
        self.owns = owns
        self.db = current_db
        self.home_db = current_db
        self.memory_usage = memory_usage
        self.refused = False  # EVAL was refused (an ACL, or renamed away): no probes on this connection again
        self.result = KeyProbeResult(queues=probes.queues)

    def run(self) -> KeyProbeResult:
        started = time.monotonic()
        probes = self.probes
        try:
            self._keys([*probes.check_single_keys, *probes.check_keys])
            self._counts(probes.count_keys)
            self._streams([*probes.check_single_streams, *probes.check_streams])
        except _Budget:
            self.result.complete = False
        finally:
            self.result.duration = time.monotonic() - started
        if self.db != self.home_db and not self.conn.closed:
            try:
                self._call([("SELECT", str(self.home_db))])
            except _Budget:
                self.conn.close()  # never reused in another database: the next scrape connects afresh
        return self.result

    # --- the parts -----------------------------------------------------------------

    def _keys(self, specs: list[KeySpec]) -> None:
        for db, names in self._expand(specs, "check_keys").items():
            self._select(db)
            for chunk in _chunks(names, PIPELINE):
                memory = "1" if self.memory_usage else "0"
                replies = self._call([("EVAL", KEY_SCRIPT, "1", name, str(MAX_VALUE_BYTES), memory) for name in chunk])
                hll = []
                for name, reply in zip(chunk, replies, strict=True):
                    reading = _key_reading(db, name, reply)
                    if reading is None:
                        continue
                    self.result.keys.append(reading)
                    if reading.type == "hll":
                        hll.append((reading, name))
                if hll:  # PFCOUNT outside the script: it may write its cached count, which a script on a replica may not
                    for (reading, _), count in zip(hll, self._call([("PFCOUNT", name) for _, name in hll]), strict=True):
                        reading.size = count if isinstance(count, int) else 0

    def _counts(self, specs: Iterable[KeySpec]) -> None:
        for spec in specs:
            db = 0 if self.cluster else spec.db
            self._select(db)
            found, complete = self._scan(spec.key, self.probes.max_counted)
            self.result.scans.append(ScanReading("count_keys", db, spec.key, len(found), complete))
            if complete:
                self.result.counts.append((db, spec.key, len(found)))

    def _streams(self, specs: list[KeySpec]) -> None:
        consumers = "1" if self.probes.stream_consumers else "0"
        for db, names in self._expand(specs, "check_streams").items():
            self._select(db)
            for chunk in _chunks(names, PIPELINE):
                replies = self._call([("EVAL", STREAM_SCRIPT, "1", name, consumers) for name in chunk])
                for name, reply in zip(chunk, replies, strict=True):
                    if isinstance(reply, list) and len(reply) == 3:
                        info, groups, by_group = reply
                        self.result.streams.append(
                            StreamReading(
                                db,
                                as_text(name),
                                pairs(info),
                                [pairs(g) for g in groups or []],
                                [[pairs(c) for c in group or []] for group in by_group or []],
                            )
                        )

    # --- helpers -------------------------------------------------------------------

    def _expand(self, specs: list[KeySpec], option: str) -> dict[int, list[bytes]]:
        """Key names by database: single keys as given, patterns by SCAN, at most ``max_keys`` in all; in cluster
        mode db0 only, and only keys this node serves."""
        by_db: dict[int, dict[bytes, None]] = {}
        budget = self.probes.max_keys
        for spec in specs:
            db = 0 if self.cluster else spec.db
            names = by_db.setdefault(db, {})
            if not spec.is_pattern:
                name = spec.key.encode()
                if self.owns(spec.key) and name not in names and budget > 0:
                    names[name] = None
                    budget -= 1
                continue
            self._select(db)
            found, complete = self._scan(spec.key, budget)
            self.result.scans.append(ScanReading(option, db, spec.key, len(found), complete))
            for name in found:
                if name not in names:
                    names[name] = None
                    budget -= 1
        return {db: list(names) for db, names in sorted(by_db.items()) if names}

    def _scan(self, pattern: str, limit: int) -> tuple[set[bytes], bool]:
        """Distinct key names matching ``pattern`` (SCAN may return a key twice); complete unless ``limit`` or the
        deadline stopped it."""
        found: set[bytes] = set()
        cursor = b"0"
        while True:
            if time.monotonic() >= self.deadline:
                return found, False
            (reply,) = self._call([("SCAN", cursor, "MATCH", pattern, "COUNT", str(self.probes.batch_size))])
            if not (isinstance(reply, list) and len(reply) == 2 and isinstance(reply[1], list)):
                return found, False
            cursor = reply[0]
            found.update(name for name in reply[1] if isinstance(name, bytes))
            if len(found) > limit:
                return set(list(found)[:limit]), False
            if cursor in (b"0", 0):
                return found, True

    def _select(self, db: int) -> None:
        if db != self.db and not self.cluster:
            (reply,) = self._call([("SELECT", str(db))])
            if isinstance(reply, ErrorReply):
                raise RespFailure("error_reply", f"SELECT {db}: {reply.message[:200]}")
            self.db = db

    def _call(self, commands: list[tuple[str | bytes, ...]]) -> list[object]:
        if time.monotonic() >= self.deadline:
            raise _Budget
        try:
            replies = self.conn.call(commands, self.deadline)  # type: ignore[arg-type]
        except RespFailure as err:
            if err.kind == "timeout":
                raise _Budget from err
            raise
        if commands[0][0] == "EVAL" and any(isinstance(reply, ErrorReply) for reply in replies):
            self.refused = True  # one refusal (the first of a pipeline); never again on this connection
            raise _Budget
        return replies


def _chunks(items: list[bytes], size: int) -> Iterable[list[bytes]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _key_reading(db: int, name: bytes, reply: object) -> KeyReading | None:
    if not isinstance(reply, list) or len(reply) != 4:
        return None
    kind, size, value, memory = reply
    return KeyReading(
        db,
        as_text(name),
        as_text(kind),
        size if isinstance(size, int) else 0,
        value if isinstance(value, bytes) else None,
        memory if isinstance(memory, int) else None,
    )
