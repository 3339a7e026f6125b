"""The Lua scripts of ``lua/`` with typed wrappers: the only way cronsvc changes Redis state.

Each script lives in ``<verb>-<numkeys>.lua`` (``+``: that many and more);
the key count in the name is checked on every call, so a wrapper and its script cannot drift apart
silently. Scripts run with EVALSHA and are loaded again on NOSCRIPT (a server
restart or SCRIPT FLUSH). Error replies of the scripts' own (``LEASE_LOST``...)
become :mod:`cronsvc.errors` exceptions; a reply meaning "Redis cannot serve this
now" (``OOM``, ``READONLY``...) stays the redis-py error it is, as a direct command
gives it, so callers treat both alike (:mod:`cronsvc.store.faults`). Clients with
and without ``decode_responses`` both work.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter
from typing import Any, NamedTuple

import hiredis
import redis
from redis.commands.core import Script

from cronsvc.errors import LeaseLost, ScriptError
from cronsvc.fires import job_of, parse_fire
from cronsvc.keys import EACH_HOST, Keys, host_pool
from cronsvc.malformed import named, shown
from cronsvc.ran import PERIOD_MS, REACH_MS, RanEntries, period_of, ran_entry
from cronsvc.run.output import OUTPUT_RETENTION_MS
from cronsvc.store.faults import is_outage
from cronsvc.store.loader import ScriptSource, load_sources, lua_dir, script_error
from cronsvc.store.replies import compact, json_object, record_json, text

__all__ = [
    "Claim", "ClaimResult", "FailResult", "PlanResult", "PublishResult", "ScriptSource",
    "AckCall", "Scripts", "ack_call", "claim_keys", "load_sources", "lua_dir", "script_error",
]

Pairs = Iterable[tuple[str, int]]  # (fire id, token)
# Fires acked per script call at most: a call blocks the server while it runs.
ACK_CHUNK = 500
# A due fire that no worker holding its definition took for this long is missed.
UNHELD_MS = 600_000
CLAIM_FIELDS = 3  # per claimed fire in the claim script's reply (fire, token, due)


class Claim(NamedTuple):
    """A fire this worker now holds; ``token`` is its attempt number and fencing token.
    (A named tuple: one is made per fire claimed, and a frozen dataclass takes some times
    longer to make.)"""

    fire_id: str
    job: str
    token: int
    due_ms: int
    reclaimed: bool = False
    payload: Any = None
    before: dict[str, Any] | None = None  # the claim of the holder whose lease lapsed
    # Why the payload cannot be read (not JSON): the fire fails without running, since
    # running it without the payload it was given could do what nobody asked.
    unreadable: str | None = None


@dataclass(frozen=True)
class ClaimResult:
    """Server time, when to claim again (-1: nothing queued), claimed and dropped fires,
    and members of the queue or working set that were not fire ids (set aside)."""

    now_ms: int
    next_ms: int
    claimed: list[Claim]
    dropped: list[tuple[str, str]]  # (fire id, reason)
    aside: list[tuple[str, str]] = field(default_factory=list)  # (member, key)


@dataclass(frozen=True)
class PublishResult:
    changed: int
    removed: int
    fires_removed: int
    conflicts: list[str]


@dataclass(frozen=True)
class PlanResult:
    added: int
    stale: list[str]


class FailResult(NamedTuple):
    verdict: str  # "retry" or "dead"
    at_ms: int  # retry time, or time of death


def schedule_outcome(res: Any) -> tuple[str, int]:
    """The reply of schedule-set for one schedule: ``(created | changed | unchanged |
    retry, rev)``."""
    return schedule_outcomes(res)[0]


def schedule_outcomes(res: Any) -> list[tuple[str, int]]:
    """The reply of schedule-set past its first two (the letters of the new ones, and the
    script's now): ``(created | changed | unchanged | retry, rev)`` per other schedule, in
    the order given."""
    return [(text(res[i]), int(res[i + 1])) for i in range(2, len(res), 2)]


#: What a letter of schedule-set's reply says of a new schedule sent unread.
NEW_OUTCOMES = {"n": "created", "u": "unchanged", "r": "retry"}


#: A schedule to set: id, rev read (:data:`UNREAD`: not read), mark read, content, actor,
#: new mark, unqueue, dues.
SetRow = tuple[str, int | str, float | None, str, str, int, Sequence[str], Sequence[int]]
#: New schedules sent unread with no fire to queue yet: per job, the id and the line to
#: store (rev 1) of each, one after the other; and the new mark of each, in that order.
NewRows = Mapping[str, tuple[Sequence[str], Sequence[int]]]
#: The rev of a schedule not read first: schedule-set creates it if it is absent, finds it
#: unchanged if it holds the definition, and replies retry (read it) otherwise.
UNREAD = "?"


def _set_keys(keys: Keys) -> list[str]:
    return [keys.schedules, keys.schedule_marks, keys.schedule_counts, keys.queue, keys.events]


def _set_args(rows: Sequence[SetRow], now_ms: int | None, new: NewRows | None = None
              ) -> list[Any]:
    args: list[Any] = [_now(now_ms), len(new or ())]
    for job, (lines, marks) in (new or {}).items():
        args += (job, len(lines) // 2)
        args += lines
        args += marks
    args.append(len(rows))
    for sid, rev, mark, content, actor, new_mark, unqueue, dues in rows:
        args += (sid, rev, "" if mark is None else _mark(mark), content, actor, new_mark,
                 len(unqueue), len(dues))
        args += unqueue
        args += dues
    return args


def _mark(mark: float | None) -> str:
    if mark is None:
        return ""
    return "inf" if mark == float("inf") else str(int(mark))


def _now(now_ms: int | None) -> str:
    return "" if now_ms is None else str(int(now_ms))


def claim_keys(k: Keys, held: str | None = None) -> list[str]:
    """The KEYS of ``lua/claim-18.lua`` on shard ``k``; ``held`` as :meth:`Scripts.claim`."""
    return [k.queue, k.working, k.attempts, k.claims, k.jobs, k.paused, k.running, k.cancels,
            k.events, k.payloads, k.dead, held or k.held(""), k.schedules, k.job_lines,
            k.outbox, k.failing, k.slots, k.malformed]


def ack_call(k: Keys, items: Sequence[Sequence[Any]], history_cap: int,
             retention_ms: int = OUTPUT_RETENTION_MS) -> tuple[list[str], list[Any]]:
    """The KEYS and ARGV of ``lua/ack-8+.lua`` on shard ``k`` for ``(fire, token, job,
    record[, then[, output[, started]]])`` items (:meth:`AckCall.add` each; without
    ``started``, the start of a record given as a mapping)."""
    return _ack_of(k, items, history_cap, retention_ms).made()


def _ack_of(k: Keys, items: Sequence[Sequence[Any]], history_cap: int,
            retention_ms: int) -> AckCall:
    call = AckCall(k, history_cap, retention_ms)
    add = call.add
    for item in items:
        record = item[3]
        if len(item) < 7 and isinstance(record, dict):  # no start given: the record's
            add(item[0], item[1], item[2], record, item[4] if len(item) > 4 else "",
                item[5] if len(item) > 5 else "", record.get("started"))
        else:
            add(*item)
    return call


class AckCall:
    """The KEYS and ARGV of one call of ``lua/ack-8+.lua`` on shard ``k``, fire by fire:
    per fire its job's history and its record of runs, then an extra of each fire whose
    success triggers jobs or that kept output (its outputs, ``output``, the whole of what
    the run kept, written where the run has a start: ``started``). A record is a mapping
    or its JSON text. Most fires have neither extra: the call carries four values and
    two keys a fire. ``ran`` and ``histories`` (job -> its history's name) may be kept
    from call to call of shard ``k`` (a worker acks many runs a second); at most
    :data:`ACK_CHUNK` fires a call (:attr:`full`)."""

    __slots__ = ("k", "keys", "args", "n", "_extra_keys", "_extras", "_ran", "_histories")

    def __init__(self, k: Keys, history_cap: int, retention_ms: int = OUTPUT_RETENTION_MS,
                 ran: RanEntries | None = None, histories: dict[str, str] | None = None
                 ) -> None:
        self.k = k
        self.keys = [k.working, k.attempts, k.claims, k.running, k.cancels, k.payloads,
                     k.outbox, k.failing]
        self.args: list[Any] = [int(history_cap), PERIOD_MS, REACH_MS, int(retention_ms), 0]
        self.n = 0
        self._extra_keys: list[str] = []
        self._extras: list[Any] = []
        self._ran = (ran or RanEntries(k)).entry
        self._histories = {} if histories is None else histories

    @property
    def full(self) -> bool:
        return self.n >= ACK_CHUNK

    def add(self, fid: str, token: int, job: str, record: Any, then: str = "",
            output: str = "", started: int | None = None) -> None:
        """Ack ``fid`` held with ``token``, ``record`` its history record; the jobs its
        success triggers ('a,b'), the output it kept (none without ``started``, the run's
        start). Nothing is added if it raises."""
        history = self._histories.get(job)
        if history is None:
            history = self._histories[job] = self.k.history(job)
        ran = self._ran(fid, job)
        if token.__class__ is not int:
            token = int(token)
        if record.__class__ is not str:
            record = record_json(record)
        if (then or output) and (then or started is not None):
            if started is None:
                output = ""
            extra = (self.n + 1, then, output,
                     "" if started is None or not output else int(started))
            self._extra_keys.append(self.k.output(fid) if output else history)
            self._extras += extra
        self.n += 1
        if ran is None:
            self.keys += (history, history)
            self.args += (fid, token, record, "")
        else:
            self.keys += (history, ran[0])
            self.args += (fid, token, record, ran[1])

    def made(self) -> tuple[list[str], list[Any]]:
        """The call's KEYS and ARGV."""
        self.args[4] = self.n
        return self.keys + self._extra_keys, self.args + self._extras


def _claims(k: Keys, res: Sequence[Any], n: int) -> tuple[list[Claim], int]:
    """The ``n`` claimed fires of the claim script's reply, from ``res[3]`` on, and where
    the reply goes on after them. Each fire is its id, token and due time; the few with a
    payload or reclaimed are named after them by their numbers (from 1). Each claim is
    made as a tuple of its fields at once (a named tuple's ``__new__`` is a Python
    function of its own), and a reply of fires with neither is read a field at a time for
    all of them (its columns sliced, mapped and zipped in C, no Python frame per fire)."""
    end = 3 + CLAIM_FIELDS * n
    paid = int(res[end])
    at = end + 2 + 2 * paid
    reclaimed = int(res[at - 1])
    after = at + 2 * reclaimed
    fids = res[3:end:CLAIM_FIELDS]
    if not paid and not reclaimed and all(map(str.__instancecheck__, fids)):
        return list(map(_made, repeat(Claim), zip(
            fids, map(_before_at, map(str.partition, fids, repeat("@"))),
            map(int, res[4:end:CLAIM_FIELDS]), map(int, res[5:end:CLAIM_FIELDS]),
            repeat(False), repeat(None), repeat(None), repeat(None)))), after
    payloads = dict(zip(map(int, res[end + 1:at - 1:2]), res[end + 2:at - 1:2], strict=True))
    befores = dict(zip(map(int, res[at:after:2]), res[at + 1:after:2], strict=True))
    claims: list[Claim] = []
    add = claims.append
    for f, i in enumerate(range(3, end, CLAIM_FIELDS), 1):
        fid = res[i]
        if f in payloads or f in befores or fid.__class__ is not str:
            add(_claimed(k, res[i:i + CLAIM_FIELDS], f in befores, payloads.get(f),
                         befores.get(f)))
        else:
            add(_made(Claim, (fid, job_of(fid), int(res[i + 1]), int(res[i + 2]), False,
                              None, None, None)))
    return claims, after


_before_at = itemgetter(0)  # of a fire id's partition at its first '@': job_of
_made = tuple.__new__


def _claimed(k: Keys, fire: Sequence[Any], reclaimed: bool, payload: Any, before: Any
             ) -> Claim:
    """A claimed fire of the claim script's reply, ``fire`` its id, token and due time,
    with its payload and the lapsed holder's claim (or None). Both are stored JSON: one
    that is not, written there by hand, must not stop the claim loop (the fire then fails,
    saying why; a claim that does not read is no holder)."""
    fid = fire[0]
    if not isinstance(fid, str):
        fid = text(fid)
    token, due = int(fire[1]), int(fire[2])
    if not payload and not before:  # most fires: no payload, no holder before
        return Claim(fid, job_of(fid), token, due, reclaimed)
    value, unreadable = None, None
    if payload:
        try:
            value = json.loads(payload)
        except ValueError:
            unreadable = named(k.payloads, fid, f"its payload is not JSON: {shown(text(payload))}")
    return Claim(fid, job_of(fid), token, due, reclaimed, value,
                 json_object(before) if before else None, unreadable)


def _ran(k: Keys, fid: str, job: str) -> tuple[str, bytes | str]:
    """The record-of-runs key and entry a script that ends ``fid`` takes; for a fire that
    is not recorded, its job's history (a key of the shard, never appended to) and ''."""
    return ran_entry(k, fid) or (k.history(job), "")


class HeldConnections(threading.local):
    """Per thread, one connection of a pool it keeps for its packed calls (the claim loop's
    claims, the results thread's acks: one call in a turn each, thousands a minute).
    Taken from the pool and given back for each call, a connection is asked whether it
    has data waiting, which turns the socket non-blocking and back and reads it: three
    system calls that each let go of the GIL, and each time, with the worker's other
    threads running, it is taken back only after a forced switch (with the pool's own
    bookkeeping, some 90 µs of CPU a claim in a drain). A held connection that failed
    (its error not a reply) goes back to its pool, and the next call takes another. For
    threads that live as long as their process: one that ends keeps its connection
    out of the pool."""

    conn: Any = None
    pool: Any = None

    def of(self, pool: Any) -> Any:
        """This thread's connection of ``pool`` (the pool of another process after a fork
        is not this one's: the pool makes itself anew, and so is the connection)."""
        conn = self.conn
        if conn is None or self.pool is not pool or conn.pid != os.getpid():
            self.drop()
            self.pool, self.conn = pool, pool.get_connection()
        return self.conn

    def drop(self) -> None:
        """Give this thread's connection back to its pool."""
        if self.conn is not None:
            conn, self.conn = self.conn, None
            self.pool.release(conn)


def _round_trip(client: redis.Redis, command: tuple[Any, ...],
                held: HeldConnections | None = None) -> Any:
    """Send ``command`` on a connection of ``client``'s pool (``held``'s of this thread,
    if given) and read its reply, with the client's retries of a lost connection, as its
    own commands have."""
    packed = [hiredis.pack_command(command)]
    pool = client.connection_pool
    if held is None:
        conn = pool.get_connection()
        try:
            return _sent(conn, packed)
        finally:
            pool.release(conn)
    conn = held.of(pool)
    try:
        return _sent(conn, packed)
    except redis.ResponseError:  # a reply (NOSCRIPT, a script's error): the connection is fine
        raise
    except BaseException:
        held.drop()
        raise


def _sent(conn: Any, packed: list[bytes]) -> Any:
    def send() -> Any:
        conn.send_packed_command(packed)
        return conn.read_response()

    return conn.retry.call_with_retry(send, lambda _: conn.disconnect())


class Scripts:
    """Typed calls of every script on one client (scripts registered once, here).

    Every method takes the shard's :class:`Keys` first (the names, with their prefix and
    shard, of the keys the script touches). Those whose script reads the clock take an
    optional ``now_ms`` that only tests pass (the script's ARGV[1]): by default the
    scripts read the Redis server clock.
    """

    def __init__(self, client: redis.Redis, *, hold: bool = False) -> None:
        self.client = client
        # hold: each thread keeps a connection for its packed calls (HeldConnections),
        # for a worker's long-lived claim and results threads
        self._held = HeldConnections() if hold else None
        self.sources = load_sources()
        self._scripts: dict[str, Script] = {
            name: client.register_script(src.text) for name, src in self.sources.items()
        }

    def run(self, name: str, keys: Sequence[str], args: Sequence[Any], client: Any = None,
            packed: bool = False) -> Any:
        """Run script ``name``; ScriptError if ``keys`` is not as many keys as its file says.
        ``packed``: the command packed in one go by hiredis (redis-py's packer looks at every
        argument first, and an ack of a few hundred fires has thousands), where the client
        is a plain one with a pool; a client that routes by key (a cluster) or holds one
        connection runs it the usual way."""
        src = self.sources.get(name)
        if src is None:
            raise ScriptError(f"no script {name!r} in {lua_dir()}")
        src.check_keys(len(keys))
        try:
            if client is None and not isinstance(self.client, redis.Redis):
                return self._run_in_slot(self._scripts[name], list(keys), list(args))
            if packed and client is None and self.client.connection is None:
                return self._run_packed(self._scripts[name], keys, args)
            return self._scripts[name](keys=list(keys), args=list(args), client=client)
        except redis.ResponseError as exc:
            if is_outage(exc):
                raise  # "not now" (OOM, READONLY, ...): callers ride it out like a lost connection
            raise script_error(exc) from exc

    def _run_in_slot(self, script: Script, keys: list[str], args: list[Any]) -> Any:
        try:
            return self.client.evalsha(script.sha, len(keys), *keys, *args)
        except redis.exceptions.NoScriptError:
            self._load(script, keys[0])
            return self.client.evalsha(script.sha, len(keys), *keys, *args)

    def _run_packed(self, script: Script, keys: Sequence[str], args: Sequence[Any]) -> Any:
        command = ("EVALSHA", script.sha, len(keys), *keys, *args)
        try:
            return _round_trip(self.client, command, self._held)
        except redis.exceptions.NoScriptError:
            self._load(script, keys[0])
            return _round_trip(self.client, command, self._held)

    def _load(self, script: Script, key: str) -> None:
        """Load ``script`` where ``key`` lives. A cluster client's script_load goes to every
        master and fails while any one is down: the other shards must keep working."""
        if isinstance(self.client, redis.Redis):
            self.client.script_load(script.script)
        else:
            node = self.client.get_node_from_key(key)  # type: ignore[attr-defined]
            self.client.execute_command("SCRIPT LOAD", script.script, target_nodes=node)

    def streamed(self, name: str, shard: Keys,
                 calls: Iterable[tuple[Sequence[str], Sequence[Any]]]) -> list[Any]:
        """Run script ``name`` once per (keys, args) of ``calls``, all on the shard of
        ``shard``: each call is sent as soon as ``calls`` makes it and the replies are read
        at the end, so the making of the next call overlaps Redis running the one before
        (a pipeline sends nothing until every call is made). The replies, in order."""
        src, script = self.sources[name], self._scripts[name]
        client = self.client if isinstance(self.client, redis.Redis) else (
            self.client.get_node_from_key(shard.queue).redis_connection)  # type: ignore[attr-defined]
        pool = client.connection_pool
        conn = pool.get_connection()
        sent: list[tuple[Sequence[str], Sequence[Any]]] = []
        replies: list[Any] = []
        try:
            for keys, args in calls:
                src.check_keys(len(keys))
                # hiredis packs every argument itself (the connection's packer looks at
                # each first): a batch has thousands
                conn.send_packed_command([hiredis.pack_command(
                    ("EVALSHA", script.sha, len(keys), *keys, *args))])
                sent.append((keys, args))
            for _ in sent:
                try:
                    replies.append(conn.read_response())
                except redis.exceptions.NoScriptError as exc:  # not run: run again below
                    replies.append(exc)
        except redis.ResponseError as exc:
            conn.disconnect()  # replies left unread
            if is_outage(exc):
                raise
            raise script_error(exc) from exc
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)
        return [self.run(name, keys, args) if isinstance(res, redis.exceptions.NoScriptError)
                else res for (keys, args), res in zip(sent, replies, strict=True)]

    # -- planner ---------------------------------------------------------------
    def publish(
        self, keys: Keys, sets: Iterable[tuple[str, str, str, str]],
        removals: Iterable[tuple[str, str]] = (),
        unqueue: Iterable[tuple[str, str, Sequence[str], str]] = (), *, generation: int,
        history_cap: int = 100, now_ms: int | None = None,
        mirror: Iterable[tuple[str, str]] = (), unmirror: Iterable[str] = (),
    ) -> PublishResult:
        """Write the definitions of file ``generation``: set ``(job, expected_digest or '-',
        policy_line, spec_json)``, remove ``(job, expected_digest)``, unqueue ``(job, why,
        fires)`` (why ``removed`` or ``replaced``: one history line per job). Jobs that
        conflict are left alone. :class:`Superseded` if a newer generation wrote this shard.
        An unqueue item's fourth field is the pool whose queue holds those fires.
        ``mirror`` ``(job, policy_line)`` and ``unmirror`` (jobs) keep ``Keys.job_lines``, the
        lines of the whole file, of a sharded fleet."""
        args: list[Any] = [_now(now_ms), int(generation), int(history_cap)]
        for group in (list(sets), list(removals)):
            args.append(len(group))
            args += [field for item in group for field in item]
        groups = [(job, why, list(fires), pool) for job, why, fires, pool in unqueue]
        args.append(len(groups))
        for job, why, fires, _ in groups:
            args += [job, why, len(fires), *fires]
        mirrored, gone = list(mirror), list(unmirror)
        args += [len(mirrored), *(field for item in mirrored for field in item), len(gone), *gone]
        res = self.run("publish", [
            keys.jobs, keys.specs, keys.watermarks, keys.events, keys.published, keys.job_lines,
            keys.attempts,
            *(key for job, _, _, pool in groups
              for key in (keys.with_pool(pool).queue, keys.history(job)))], args)
        return PublishResult(int(res[0]), int(res[1]), int(res[2]), [text(j) for j in res[3]])

    def generation(
        self, keys: Keys, digest: str, planner: str, seen: int | None, jobs: int,
        *, now_ms: int | None = None,
    ) -> tuple[int, int]:
        """Make the file ``digest`` the newest generation unless another was published after
        generation ``seen`` (None: whatever is newest). ``(generation, status)``: status 1
        now newest, 0 it was already, -1 another file came first (nothing written).
        ``keys``: those of the first shard, where the fleet's keys live."""
        res = self.run("generation", [keys.generation, keys.generations],
                       [_now(now_ms), digest, planner, "" if seen is None else int(seen), jobs])
        return int(res[0]), int(res[1])

    def plan(
        self, keys: Keys, entries: Iterable[tuple[str, str, int, Sequence[int]]],
    ) -> PlanResult:
        """Queue fires of ``(job, digest, upto_ms, dues ascending)`` past each watermark."""
        body: list[Any] = []
        count = 0
        for job, digest, upto, dues in entries:
            body += [job, digest, int(upto), len(dues), *(int(d) for d in dues)]
            count += 1
        res = self.run("plan", [keys.queue, keys.watermarks, keys.jobs], [count, *body])
        return PlanResult(int(res[0]), [text(j) for j in res[1]])

    # -- worker ----------------------------------------------------------------
    def claim(
        self, keys: Keys, worker_id: str, batch: int = 1, lease_ms: int = 30_000,
        scan_limit: int | None = None, *, held: str | None = None, unheld_ms: int = UNHELD_MS,
        now_ms: int | None = None, ahead_ms: int = 0, prefetch: int = 0,
    ) -> ClaimResult:
        """Claim up to ``batch`` fires: expired leases first, then due fires in due order.

        ``held`` is the key of the definitions this worker holds (``Keys.held``): fires of
        other definitions are left for other workers, and dropped as missed once due for
        ``unheld_ms`` without one taking them. None takes fires of any definition (tools).
        ``ahead_ms``: once every due fire is taken, fires due within this long that nothing
        could hold back at their due time are taken too (their ``due_ms`` is after the
        reply's ``now_ms``): the caller starts each at its due time (lua/claim-18.lua, 2b).
        ``batch`` 0 with ``prefetch``: only such fires, up to ``prefetch``, and none while a
        fire is due now (a worker with no free slot, whose fires wait in it for one).
        """
        # Packed by hiredis: the claim loop sends one per turn (see run).
        res = self.run("claim", claim_keys(keys, held),
                       [_now(now_ms), worker_id, batch, int(lease_ms),
                        max(scan_limit or batch, batch), int(unheld_ms),
                        "1" if held is None else "0", int(ahead_ms), int(prefetch)],
                       packed=True)
        # Flat reply: now, next, n, n * (fire, token, due), p, p * (number, payload),
        # r, r * (number, before), m, m * (fire, why), a, a * (member, key)
        claimed, at = _claims(keys, res, int(res[2]))
        m = int(res[at])
        drops = res[at + 1:at + 1 + 2 * m]
        dropped = [(text(drops[i]), text(drops[i + 1])) for i in range(0, len(drops), 2)]
        rest = res[at + 2 + 2 * m:]
        aside = [(text(rest[i]), text(rest[i + 1])) for i in range(0, len(rest), 2)]
        return ClaimResult(int(res[0]), int(res[1]), claimed, dropped, aside)

    def dispatch(self, key: str, op: str, delivery: int, keep_ms: int, *rest: Any,
                 now_ms: int | None = None) -> Any:
        """One step of a dispatched fire's deliveries in the stream ``key`` (its
        :meth:`Keys.deliveries`; a consumer knows it from the message, not the shard):
        ``op`` and its reply as ``lua/dispatch-1.lua`` says."""
        return self.run("dispatch", [key], [_now(now_ms), op, int(delivery), int(keep_ms),
                                            *rest])

    def heartbeat(
        self, keys: Keys, lease_ms: int, pairs: Pairs, *, now_ms: int | None = None,
    ) -> list[int]:
        """Extend leases; per pair 1 ok, 2 ok but cancelled (stop the run), 0 lease lost."""
        flat = [x for fid, token in pairs for x in (fid, int(token))]
        if not flat:
            return []
        res = self.run("heartbeat", [keys.working, keys.attempts, keys.cancels],
                       [_now(now_ms), int(lease_ms), *flat])
        return [int(x) for x in res]

    def ack(
        self, keys: Keys, fire_id: str, token: int, job: str, record: Any,
        history_cap: int = 100,
    ) -> None:
        """Finish a held fire and add ``record`` to its job's history; LeaseLost if taken over."""
        [lost] = self._acks(keys, [(fire_id, token, job, record)], history_cap)
        if lost is not None:
            raise LeaseLost(lost)

    def ack_many(
        self, keys: Keys, acks: Iterable[tuple[str, int, str, Any] |
                                                 tuple[str, int, str, Any, str] |
                                                 tuple[str, int, str, Any, str, str] |
                                                 tuple[str, int, str, Any, str, str, int]],
        history_cap: int = 100, retention_ms: int = OUTPUT_RETENTION_MS,
    ) -> list[bool]:
        """Ack ``(fire_id, token, job, record[, jobs its success triggers 'a,b'[, output[,
        the run's start]]])`` items of one shard (as :func:`ack_call`); False = lease lost.
        Outputs are kept ``retention_ms``."""
        return [lost is None
                for lost in self._acks(keys, list(acks), history_cap, retention_ms)]

    def _acks(self, k: Keys, items: list[Any], history_cap: int,
              retention_ms: int = OUTPUT_RETENTION_MS) -> list[str | None]:
        """Per item None if acked, else why not; ACK_CHUNK items per script call."""
        out: list[str | None] = []
        for i in range(0, len(items), ACK_CHUNK):
            out += self.acked(_ack_of(k, items[i:i + ACK_CHUNK], history_cap,
                                          retention_ms))
        return out

    def acked(self, call: AckCall) -> list[str | None]:
        """Run an ack made fire by fire: per fire None if acked, else why not (lease lost)."""
        res = self.run("ack", *call.made(), packed=True)
        out: list[str | None] = [None] * call.n
        for i in range(0, len(res), 2):  # the fires not acked: number, why
            out[int(res[i]) - 1] = text(res[i + 1])
        return out

    def fail(
        self, keys: Keys, fire_id: str, token: int, job: str, record: Any,
        history_cap: int, max_attempts: int, retry_at_ms: int, *, notify: str = "",
        pause_after: int = 0, on_failure: str = "", now_ms: int | None = None,
        output: str = "", retention_ms: int = OUTPUT_RETENTION_MS,
    ) -> FailResult:
        """Record a failed attempt: requeued at ``retry_at_ms`` while attempts remain, else
        dead. ``notify`` (the job's :attr:`Policy.notify` mask) and ``pause_after`` say what
        goes into the outbox, and when the job is paused. ``output``, what the attempt
        kept, is stored beside the record for ``retention_ms``."""
        ran_key, entry = _ran(keys, fire_id, job)
        res = self.run("fail", [
            keys.working, keys.queue, keys.attempts, keys.claims, keys.running, keys.cancels,
            keys.dead, keys.history(job), keys.events, keys.outbox, keys.failing, keys.paused,
            ran_key, keys.output(fire_id),
        ], [_now(now_ms), fire_id, int(token), job, record_json(record), int(history_cap),
            int(max_attempts), int(retry_at_ms), notify, int(pause_after), on_failure,
            PERIOD_MS, REACH_MS, entry, output, int(retention_ms)])
        return FailResult(text(res[0]), int(res[1]))

    def release(self, keys: Keys, pairs: Pairs) -> int:
        """Give unstarted claims back at their due time, attempt not counted; number released."""
        flat = [x for fid, token in pairs for x in (fid, int(token))]
        if not flat:
            return 0
        return int(self.run("release",
                            [keys.working, keys.queue, keys.attempts, keys.claims], flat))

    def record(self, keys: Keys, job: str, record: Any, history_cap: int = 100) -> None:
        """Add ``record`` to ``job``'s history and to the events list."""
        self.run("record", [keys.history(job), keys.events],
                 [record_json(record), int(history_cap)])

    # -- runtime schedules ---------------------------------------------------------
    def schedule_set(
        self, keys: Keys, sid: str, rev: int | str, mark: float | None, content: str,
        actor: str, new_mark: int, unqueue: Sequence[str], dues: Sequence[int], *,
        now_ms: int | None = None,
    ) -> tuple[str, int]:
        """Create or change one schedule (a compare-and-set on ``rev`` and ``mark``):
        ``(outcome, rev)`` with outcome created, changed, unchanged or retry."""
        return self.schedule_set_many(keys, [(sid, rev, mark, content, actor, new_mark,
                                              unqueue, dues)], now_ms=now_ms)[0]

    def schedule_set_many(self, keys: Keys, rows: Sequence[SetRow], *,
                          now_ms: int | None = None) -> list[tuple[str, int]]:
        """:meth:`schedule_set` of each row (id, rev, mark, content, actor, new mark,
        unqueue, dues) in one call: their ``(outcome, rev)`` in order."""
        return schedule_outcomes(self.run("schedule-set", _set_keys(keys),
                                          _set_args(rows, now_ms)))

    def schedule_set_stream(
        self, shard: Keys, batches: Iterable[tuple[Keys, NewRows, Sequence[SetRow]]]
    ) -> list[tuple[str, int, list[tuple[str, int]]]]:
        """:meth:`schedule_set_many` of each (keys of a pool of ``shard``, new ones, rows)
        batch, each sent as soon as ``batches`` makes it (:meth:`streamed`): per
        batch the outcome letters of the new ones (:data:`NEW_OUTCOMES`), in the order
        given, the script's clock (ms) and ``(outcome, rev)`` of each row. A new one is
        created where there is none, found unchanged where it is there with that content,
        and left to read first (``r``) otherwise."""
        calls = ((_set_keys(keys), _set_args(rows, None, new)) for keys, new, rows in batches)
        return [(text(res[0]), int(res[1]), schedule_outcomes(res))
                for res in self.streamed("schedule-set", shard, calls)]

    def schedule_delete(self, keys: Keys, sid: str, rev: int, mark: float | None,
                        unqueue: Sequence[str], *, now_ms: int | None = None) -> str:
        """Delete one schedule and unqueue ``unqueue``: deleted, absent or retry."""
        return text(self.run("schedule-delete", [keys.schedules, keys.schedule_marks,
                                                 keys.schedule_counts, keys.queue, keys.events],
                             [_now(now_ms), sid, int(rev), _mark(mark), *unqueue]))

    def schedule_plan(self, keys: Keys,
                      entries: Sequence[tuple[str, int, float, int, Sequence[int]]]
                      ) -> PlanResult:
        """Queue fires of schedules: per entry (id, rev read, mark read, new mark, dues)."""
        args: list[Any] = [len(entries)]
        for sid, rev, mark, new_mark, dues in entries:
            args += [sid, int(rev), _mark(mark), int(new_mark), len(dues), *(int(d) for d in dues)]
        res = self.run("schedule-plan", [keys.schedules, keys.schedule_marks, keys.queue], args)
        return PlanResult(int(res[0]), [text(s) for s in res[1]])

    def schedule_due(self, keys: Keys, upto: int, offset: int, page: int,
                     ) -> tuple[list[tuple[str, int, str]], int]:
        """Schedules whose mark is below ``upto`` (past the first ``offset``), at most
        ``page``: (id, mark, stored line) each; and how many entries were set aside because
        they were no schedule's mark or no stored schedule."""
        res = self.run("schedule-due", [keys.schedules, keys.schedule_marks, keys.malformed],
                       ["", int(upto), int(offset), int(page)])
        due = [(text(res[i]), int(res[i + 1]), text(res[i + 2]))
               for i in range(0, len(res) - 1, 3)]
        return due, int(res[-1])

    def schedule_aside(self, keys: Keys, sid: str, rev: str, why: str) -> bool:
        """Set aside a schedule whose line does not read; False if it changed meanwhile."""
        return self.run("schedule-aside", [keys.schedules, keys.schedule_marks, keys.malformed],
                        ["", sid, rev, why]) == 1

    # -- client ----------------------------------------------------------------
    def enqueue(
        self, keys: Keys, fire_id: str, due_ms: int, payload: Any = None, *,
        bounded: bool = False, now_ms: int | None = None,
    ) -> bool:
        """Queue a one-off fire; False if it is queued already. UnknownJob if not published;
        ``bounded`` (a trigger): Skipped, not queued, if the job's bounds would drop it now
        (``keys`` with its pool's working set)."""
        body = "" if payload is None else compact(payload)
        return self.run("enqueue", [keys.queue, keys.payloads, keys.jobs, keys.running,
                                    keys.working, keys.slots],
                        [_now(now_ms), fire_id, int(due_ms), body, "1" if bounded else ""]) == 1

    def cancel(self, keys: Keys, fire_id: str, *, now_ms: int | None = None) -> bool:
        """Unqueue a fire that has not started; False if it is not queued."""
        return self.run("cancel", [keys.queue, keys.payloads, keys.attempts, keys.events],
                        [_now(now_ms), fire_id]) == 1

    def pause(
        self, keys: Keys, job: str, note: str = "", *, now_ms: int | None = None,
    ) -> tuple[int, list[tuple[str, int, str]]]:
        """Pause ``job``: ``(since_ms, [(fire, lease deadline, claim JSON)])`` of its fires
        claimed before. UnknownJob if it is not published."""
        res = self.run("pause", [keys.job_lines, keys.paused, keys.working, keys.claims],
                       [_now(now_ms), job, note])
        return int(res[0]), [(text(res[i]), int(res[i + 1]), text(res[i + 2]))
                             for i in range(1, len(res), 3)]

    def resume(
        self, keys: Keys, job: str, pause_json: str = "", fires: Iterable[str] = (),
        *, now_ms: int | None = None,
    ) -> tuple[int, list[str]]:
        """End ``job``'s pause and queue ``fires`` again: ``(status, fires queued)``, status
        1 resumed, 0 not paused, -1 the pause is no longer ``pause_json`` (nothing done)."""
        res = self.run("resume", [keys.paused, keys.queue, keys.working, keys.dead, keys.events,
                                  keys.failing], [_now(now_ms), job, pause_json, *fires])
        return int(res[0]), [text(f) for f in res[1:]]

    def retry_dead(self, keys: Keys, fire_id: str, *, now_ms: int | None = None) -> bool:
        """Queue a dead fire again now with fresh attempts; False if it is not dead."""
        return self.run("retry", [keys.dead, keys.queue, keys.attempts, keys.events],
                        [_now(now_ms), fire_id]) == 1

    def backfill(
        self, keys: Keys, owner: str, job: str, fires: Sequence[str], *, queue: bool,
        line: Any = None, history_cap: int = 100, now_ms: int | None = None,
    ) -> list[str]:
        """Queue the ``fires`` of ``owner`` (``job``, or ``!<schedule id>``) that did not run,
        with attempts 0 (``queue``), or only say which: per fire ``queued`` / ``to run``,
        ``queued already``, ``in flight``, ``dead`` or ``ran``. ``keys``: the shard and pool
        of the fires; ``line``, a history record added to ``job``'s history if any is
        queued."""
        if not fires:
            return []
        periods = sorted({period_of(parse_fire(fid)[1]) for fid in fires})
        res = self.run("backfill", [
            keys.queue, keys.working, keys.dead, keys.attempts, keys.events, keys.history(job),
            *(keys.ran(owner, p) for p in periods),
        ], [_now(now_ms), "1" if queue else "0", record_json(line) if line else "",
            int(history_cap), PERIOD_MS, *fires])
        return [text(r) for r in res]

    def purge_dead(
        self, keys: Keys, job: str | None = None, fires: Sequence[str] = (), *,
        now_ms: int | None = None,
    ) -> int:
        """Forget the shard's dead fires (only ``job``'s if given, only ``fires`` if given);
        how many went."""
        return int(self.run("purge", [keys.dead, keys.attempts, keys.payloads, keys.events],
                            [_now(now_ms), job or "", *fires]))

    def each_host(self, keys: Keys, host: str, window_ms: int, limit: int = 1000, *,
                  now_ms: int | None = None) -> tuple[int, int]:
        """Copy the due each-host fires of the shard into ``host``'s own queue, once each;
        ``(copied, due time of the next fire not due yet or -1)``."""
        res = self.run("each-host", [keys.with_pool(EACH_HOST).queue, keys.each_host_marks,
                                     keys.with_pool(host_pool(host)).queue],
                       [_now(now_ms), host, int(window_ms), int(limit)])
        return int(res[0]), int(res[1])

    def chain(self, keys: Keys, fire_id: str, due_ms: int, payload: Any, line: Any,
              history_cap: int = 100, *, now_ms: int | None = None) -> int:
        """Queue a chain fire once ever, with ``line`` (a history record of the link) in its
        job's history: 1 queued, 0 queued before, -1 job not published."""
        return int(self.run("chain", [keys.queue, keys.payloads, keys.jobs, keys.chained,
                                      keys.history(job_of(fire_id))],
                            [_now(now_ms), fire_id, int(due_ms), compact(payload),
                             record_json(line), int(history_cap)]))

    # -- notifier --------------------------------------------------------------
    def notify_lease(self, keys: Keys, notifier: str, lease_ms: int) -> bool:
        """Take or keep the notifier lease for ``lease_ms`` (0: give it up); True if held."""
        return int(self.run("notify-lease", [keys.notify_lease], [notifier, int(lease_ms)])) == 1

    def notify_route(self, keys: Keys, notifier: str, routed: int,
                     episodes: Sequence[tuple[str, str]],
                     messages: Sequence[tuple[str, str, str]], aside: Sequence[str] = (),
                     *, now_ms: int | None = None) -> int:
        """Drop ``routed`` entries from the oldest end of this shard's outbox, keep the
        lines of ``aside`` (entries of it that are no event) in its list of entries set
        aside, write the ``(field, JSON or '')`` episode changes and queue ``(channel, id,
        JSON)`` messages not queued or sent before; how many were queued. NotLeader
        without the lease."""
        args: list[Any] = [_now(now_ms), notifier, int(routed), len(aside), *aside,
                           len(episodes)]
        for name, value in episodes:
            args += [name, value]
        for _, mid, body in messages:
            args += [mid, body]
        return int(self.run("notify-route", [
            keys.notify_lease, keys.notify_deliveries, keys.notify_sent, keys.notify_episodes,
            keys.outbox, keys.malformed,
            *(keys.notify_due(channel) for channel, _, _ in messages)], args))

    def notify_settle(self, keys: Keys, channel: str, mid: str, verdict: str,
                      retry_at_ms: int | None = None, body: str = "", *,
                      now_ms: int | None = None) -> bool:
        """Record one attempt of message ``mid``: sent, retry (at ``retry_at_ms``, ``body``
        its new JSON) or dead (given up on); False if it was settled already."""
        return int(self.run("notify-settle", [
            keys.notify_deliveries, keys.notify_due(channel), keys.notify_sent, keys.notify_dead,
        ], [_now(now_ms), mid, verdict, "" if retry_at_ms is None else int(retry_at_ms),
            body])) == 1
