"""Capture: the cache of active evals (prepared once per revision), scoring an output
against every active eval in scope, and reading captures back."""

from __future__ import annotations

import contextlib
import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from itertools import chain, islice
from typing import Any, cast

from simeval.checks import (
    CheckedCapture,
    KeyedCapture,
    as_utc,
    check_capture,
    check_capture_key,
    check_page,
    check_storable,
    naive_utc,
    parse_time,
    utc_now,
)
from simeval.jsontypes import JSONValue
from simeval.service.adopt import adopt_span, merge_proxied
from simeval.service.base import Part, get_row
from simeval.service.capture_score import Active, prepare, score_capture
from simeval.service.capture_walk import MOST_CHUNK, CaptureScope, capture_chunks, count_in_scope
from simeval.service.cursor import OLDER, Page, Position, keyset_page, page_position
from simeval.service.filters import parse_meta
from simeval.service.meta_counts import rolled_capture_count
from simeval.service.models import CaptureOut, CaptureResultOut, CaptureResultRow
from simeval.service.queries import Row, capture_result_id, capture_rows, review_out
from simeval.service.settings import (
    AUTO_EVALUATE_KEY,
    INDEXED_META_KEY,
    META_WRITING_KEY,
    REVISION_KEY,
)
from simeval.store import Capture, DatabaseBusyError, Eval, Tx
from simeval.store.captures_sql import (
    active_evals,
    captures_by_id,
    eval_names,
    index_captures,
    insert_capture,
    is_integrity_error,
    read_flags,
    read_flags_tx,
    stored_keys,
    tx_connection,
    versions_of,
)
from simeval.store.meta_index import DEFAULT_INDEXED_KEYS, indexed_keys
from simeval.store.meta_rollup import ROLLUP_KEY
from simeval.store.results_sql import capture_reviews, version_refs
from simeval.store.rollups import ROLLUP_EVERY, roll_up
from simeval.store.spans_sql import Recount
from simeval.vocabulary import normal_meta

log = logging.getLogger("simeval.service")


def in_force(s: Tx, evals: list[Eval]) -> list[Eval]:
    """The versions of ``evals`` that score captures: an eval edited while active keeps
    scoring with ``active_version`` (its definition read from ``eval_versions``) until the
    pending version is activated. The ones returned for a pinned version are detached copies.
    """
    pinned = {e.id: e.active_version for e in evals if e.active_version not in (None, e.version)}
    if not pinned:
        return evals
    rows = {v.eval_id: v for v in versions_of(s, pinned) if v.version == pinned[v.eval_id]}
    out = []
    for e in evals:
        v = rows.get(e.id)
        if v is None:
            out.append(e)
            continue
        out.append(
            Eval(
                id=e.id,
                name=e.name,
                type=e.type,
                status=e.status,
                version=v.version,
                references=list(v.references),
                threshold=v.threshold,
                input_scope=v.input_scope,
                options=dict(v.options),
                fingerprint=v.fingerprint,
            )
        )
    return out


class CaptureService(Part):
    """Capture and the cache of prepared active evals it scores with."""

    _active: tuple[int, Active] | None = None
    # the metadata keys captures index (``capture_meta``), by the setting's stored value
    _meta_keys: tuple[object, tuple[str, ...]] = (None, DEFAULT_INDEXED_KEYS)

    def _prepared(self, revision: int) -> Active:
        """The active evals, prepared once per ``revision``."""
        cached = self._active
        if cached is None or cached[0] != revision:
            with self.core.lock:
                # another thread may have prepared this revision while this one waited
                cached = self._active
                if cached is None or cached[0] != revision:
                    with self.store.read() as s:
                        evals = in_force(s, active_evals(s))
                    cached = self._active = (revision, prepare(evals))
        return cached[1]

    def capture(
        self,
        input: str,
        output: str,
        conversation_id: str | None = None,
        metadata: Mapping[str, object] | None = None,
        *,
        explain: bool = False,
        captured_at: object = None,
        capture_key: str | None = None,
    ) -> CaptureOut:
        """Store an engine response and score it against every active eval in scope.

        One transaction: the capture and all its results are stored, or nothing is. With
        automatic evaluation off the capture is stored unscored (``evaluated=False``).
        ``explain=True`` adds the explanation to each failing result in the answer (it is
        always available later from ``get_result``). ``captured_at`` (a datetime or ISO
        text, default now) dates a capture taken from a log, and its results with it.
        Texts longer than ``MAX_TEXT_CHARS`` are refused (``InvalidInput``), nothing stored.

        The results are scored by the eval-set scorer (``scoring.evalset``) and stored packed
        on the capture: one row written however many evals scored it.

        ``capture_key`` (up to 200 characters, e.g. a response id) makes the capture
        idempotent: when a capture with that key is already stored, nothing is stored and the
        stored capture is returned, with its results (``replayed`` is then True).

        >>> from simeval.service import Service
        >>> svc = Service(":memory:")
        >>> first = svc.capture("q", "a", capture_key="resp-1")
        >>> again = svc.capture("q", "a", capture_key="resp-1")
        >>> (again.id == first.id, first.replayed, again.replayed)
        (True, False, True)
        """
        checked = check_capture(input, output, conversation_id, metadata, captured_at)
        keyed = (*checked, check_capture_key(capture_key))
        return self.capture_checked([keyed], explain=explain)[0]

    def capture_checked(
        self,
        items: Sequence[CheckedCapture | KeyedCapture],
        *,
        explain: bool = False,
        lock_wait: float | None = None,
        score: bool = True,
    ) -> list[CaptureOut]:
        """Store captures already checked by ``check_capture``, in one transaction (all or
        none): what ``capture`` does for one, for a server that gathers the captures arriving
        together into one commit. ``score=False`` stores them unscored (``evaluated`` False,
        no results), e.g. texts that arrived cut.

        An item may carry a capture key last (``KeyedCapture``, checked by
        ``check_capture_key``): an item whose key is stored already, or repeats the key of an
        earlier item of the batch, is not stored; its answer is the stored capture, marked
        ``replayed``. The database's unique index on the key decides between writers racing
        with the same key: the loser's transaction is rolled back and run again, and then
        finds the winner's capture. ``lock_wait`` bounds the wait for the write lock
        (``Store.raw_write``): ``DatabaseBusyError`` after it, nothing stored.
        """
        if not items:
            return []
        keyed = any(len(item) > 5 and item[5] is not None for item in items)
        races = 0
        for _ in range(_KEY_RACE_RETRIES + 10):
            try:
                done = self._capture_batch(items, explain, lock_wait, score)
                self._announce(done)
                return done
            except _Unprepared as missing:
                self._prepared(missing.revision)  # then again, the revision ready
            except Exception as exc:
                unique = is_integrity_error(self.store, exc)
                races += 1
                if not (keyed and unique) or races >= _KEY_RACE_RETRIES:
                    raise
        raise RuntimeError("the active evals kept changing while capturing; nothing stored")

    def adopt_span(
        self, capture_id: int, conversation_id: str | None, span_meta: Mapping[str, JSONValue]
    ) -> bool:
        """The proxy's capture of a call takes what its span adds (``adopt.adopt_span``):
        the span's conversation id where it has none, the metadata keys it lacks, the span's
        ids over those read from the request's ``traceparent``. True when the capture
        changed."""

        def merge(s: Tx) -> bool:
            flags = read_flags_tx(s, _FLAG_KEYS)
            keys = self._indexed_meta(flags)
            return adopt_span(s, keys, capture_id, conversation_id, span_meta)

        try:
            return self.store.run_write(merge)
        except Recount:  # counted meanwhile: again, with the capture lock held exclusively
            return self.store.run_write(merge)

    def merge_proxied(
        self, capture_id: int, proxied: CheckedCapture | KeyedCapture
    ) -> CaptureOut | None:
        """One call seen twice, its span stored first: the span's capture ``capture_id``
        takes the proxy's copy ``proxied`` (checked by ``check_capture``: its exact texts,
        its metadata merged over the span's; the span's conversation and ids kept) and, when
        its texts change or it was stored unscored, is scored again by the active evals
        (``adopt.merge_proxied``: the one write besides ``rescore`` that replaces stored
        results). One write transaction: all of it or nothing. A capture that had no results
        before and has now is announced to the capture listeners (its scores exported once);
        one scored before is not (its results went out already). Returns the capture as
        stored now, or None when there is no such capture or it is the proxy's already."""
        text_in, output, conversation_id, metadata = proxied[:4]
        before: list[bool] = []

        def merge(s: Tx) -> CaptureOut | None:
            flags = read_flags_tx(s, _FLAG_KEYS)
            auto = _json_flag(flags.get(AUTO_EVALUATE_KEY), True) is not False
            revision = int(_json_flag(flags.get(REVISION_KEY), 0) or 0)
            cached = self._active
            if auto and (cached is None or cached[0] != revision):
                raise _Unprepared(revision)  # prepared outside the write transaction
            active = cached[1] if auto and cached is not None else None

            def score(text_in: str, output: str) -> bytes | None:
                return score_capture(active, text_in, output)[0]

            merged = merge_proxied(
                s,
                self._indexed_meta(flags),
                capture_id,
                (text_in, output, conversation_id, normal_meta(metadata)),
                score if active is not None else None,
            )
            if merged is None:
                return None
            before[:] = [merged[1]]
            return self._capture_out(s, merged[0])

        for _ in range(10):
            try:
                out = self.store.run_write(merge)
                break
            except _Unprepared as missing:
                self._prepared(missing.revision)
            except Recount:  # counted meanwhile: again, with the capture lock held exclusively
                continue
        else:
            raise RuntimeError("the active evals kept changing while merging; nothing stored")
        if out is not None and not before[0] and out.evaluated and out.results:
            self._announce([out])
        return out

    def on_captured(self, listener: Callable[[list[CaptureOut]], None]) -> None:
        """Call ``listener`` with each batch of captures once committed (stored ones first
        time and replayed ones alike: ``replayed`` tells them apart), on the storing thread:
        it must return at once (queue them; ``simeval.web.otlp_export`` does)."""
        self.core.capture_listeners.append(listener)

    def _announce(self, done: list[CaptureOut]) -> None:
        # committed already: a listener's failure must not fail the capture
        for listener in list(self.core.capture_listeners):
            try:
                listener(done)
            except Exception:
                log.exception("a capture listener failed; the captures are stored")

    def _capture_batch(
        self,
        items: Sequence[CheckedCapture | KeyedCapture],
        explain: bool,
        lock_wait: float | None,
        score: bool = True,
    ) -> list[CaptureOut]:
        keys: list[str | None] = [item[5] if len(item) > 5 else None for item in items]
        outs: list[CaptureOut | int] = []
        with self.store.raw_write(lock_wait) as cur:
            flags = read_flags(cur, _FLAG_KEYS)
            auto = score and _json_flag(flags.get(AUTO_EVALUATE_KEY), True) is not False
            revision = int(_json_flag(flags.get(REVISION_KEY), 0) or 0)
            cached = self._active
            if auto and (cached is None or cached[0] != revision):
                # prepared outside the write transaction (nothing is written yet): the
                # write lock is not held while the evals are read and prepared, and an
                # in-memory database's one connection is not asked for a second transaction
                raise _Unprepared(revision)
            active = cached[1] if auto and cached is not None else None
            stored = self._stored_keys(cur, {k for k in keys if k is not None})
            fresh: dict[str, CaptureOut] = {}
            new: list[CaptureOut] = []
            for item, key in zip(items, keys, strict=True):
                if key is None:
                    out = self._capture(cur, active, *item[:5], None, explain)
                    outs.append(out)
                    new.append(out)
                elif key in stored:
                    outs.append(stored[key])  # read back after the commit
                elif key in fresh:
                    again = fresh[key].model_copy()
                    again.mark_replayed()
                    outs.append(again)
                else:
                    out = fresh[key] = self._capture(cur, active, *item[:5], key, explain)
                    outs.append(out)
                    new.append(out)
            if new:
                # the read tables (migration 0010) in the captures' transaction
                rows = [
                    (
                        o.id,
                        o.conversation_id,
                        o.metadata,
                        naive_utc(o.captured_at),
                        *o.result_counts(),
                    )
                    for o in new
                ]
                index_captures(cur, self.store, rows, self._indexed_meta(flags))
        if stored:
            with self.store.read() as s:
                found = captures_by_id(s, list(stored.values()))
                olds = {i: self._capture_out(s, cap) for i, cap in found.items()}
            for out in olds.values():
                out.mark_replayed()
            outs = [olds[o] if isinstance(o, int) else o for o in outs]
        done = cast(list[CaptureOut], outs)
        new_ids = [o.id for o in done if not o.replayed]
        upto = int(_json_flag(flags.get(ROLLUP_KEY), 0) or 0)
        if new_ids and max(new_ids) - upto >= ROLLUP_EVERY:
            # a step of the rollup every few hundred captures, in its own transaction; the
            # captures are committed: a busy database only postpones it to a later capture
            with contextlib.suppress(DatabaseBusyError):
                self.store.run_write(lambda s: roll_up(tx_connection(s)))
        return done

    def _indexed_meta(self, flags: Mapping[str, object]) -> tuple[str, ...]:
        """The metadata keys a capture indexes, from the settings read with its flags (the
        keys being filled in while a change of ``indexed_meta`` is under way, else the
        declared ones), parsed once per stored value."""
        raw = flags.get(META_WRITING_KEY, flags.get(INDEXED_META_KEY))
        cached = self._meta_keys
        if raw != cached[0]:
            declared = _json_flag(raw, None)
            keys = indexed_keys(declared if isinstance(declared, list) else None)
            cached = self._meta_keys = (raw, keys)
        return cached[1]

    def _stored_keys(self, cur: Any, keys: set[str]) -> dict[str, int]:
        """The ids of the captures stored under ``keys`` (read in the write transaction)."""
        return stored_keys(cur, self.store, keys)

    def _capture(
        self,
        cur: Any,
        active: Active | None,
        input: str,
        output: str,
        conversation_id: str | None,
        metadata: dict[str, Any] | None,
        when: datetime | None,
        key: str | None,
        explain: bool,
    ) -> CaptureOut:
        # one metadata vocabulary (``simeval.vocabulary``) whichever path the capture came by
        metadata = normal_meta(metadata)
        now = when or utc_now()
        auto = active is not None
        blob, counts, scored, lacking = score_capture(active, input, output)
        capture_id = insert_capture(
            cur,
            self.store,
            input=input,
            output=output,
            conversation_id=conversation_id,
            metadata=metadata,
            captured_at=now,
            evaluated=auto,
            scores=blob,
            capture_key=key,
        )

        def results() -> list[CaptureResultRow]:
            assert active is not None
            return self._fresh_results(active, scored, capture_id, input, output, explain, lacking)

        def results_json() -> bytes:
            assert active is not None
            return self._fresh_json(active, scored, capture_id, lacking)

        out = CaptureOut.build(
            results if auto else [],
            results_json=results_json if auto and not explain else None,
            counts=counts if auto else (0, 0),
            id=capture_id,
            input=input,
            output=output,
            conversation_id=conversation_id,
            metadata=metadata,
            captured_at=as_utc(now),
            evaluated=auto,
            capture_key=key,
        )
        return out

    @staticmethod
    def _fresh_json(
        active: Active,
        scored: list[tuple[Any, list[int], Sequence[float], Sequence[int]]],
        capture_id: int,
        lacking: set[tuple[int, int]],
    ) -> bytes:
        """The JSON of ``_fresh_results`` (without explanations), from the prepared pieces;
        ``lacking``: the (group id, member) that miss a required term (they fail)."""
        parts = []
        start = f'{{"id":"{capture_id}'
        fixed, refs = active.json_fixed, active.json_refs
        for group, members, sc, at in scored:
            positions = group.positions
            for m in members:
                p = positions[m]
                after_id, threshold, mid = fixed[p]
                score = sc[m]
                parts.append(
                    "".join(
                        (
                            start,
                            after_id,
                            _JSON_FLOAT(score),
                            ',"passed":true,'
                            if score >= threshold and (id(group), m) not in lacking
                            else ',"passed":false,',
                            mid,
                            refs[p][at[m]],
                        )
                    )
                )
        return ("[" + ",".join(parts) + "]").encode()

    @staticmethod
    def _fresh_results(
        active: Active,
        scored: list[tuple[Any, list[int], Sequence[float], Sequence[int]]],
        capture_id: int,
        input: str,
        output: str,
        explain: bool,
        lacking: set[tuple[int, int]],
    ) -> list[CaptureResultRow]:
        rows: list[CaptureResultRow] = []
        for group, members, sc, at in scored:
            scorer = group.scorer
            fp = scorer.fingerprint
            for m in members:
                spec = active.evalset.evals[group.positions[m]]
                score = sc[m]
                ok = score >= spec.threshold and (id(group), m) not in lacking
                rows.append(
                    {
                        "id": capture_result_id(capture_id, spec.id or 0),
                        "eval_id": spec.id or 0,
                        "eval_name": spec.name,
                        "eval_type": "similarity",
                        "eval_version": spec.version,
                        "score": score,
                        "passed": ok,
                        "threshold": spec.threshold,
                        "fingerprint": fp,
                        "matched_index": at[m],
                        "matched_reference": spec.references[at[m]],
                        "explanation": scorer.explain(
                            output, list(spec.references), top=10, input=input
                        ).to_dict()
                        if explain and not ok
                        else None,
                        "review": None,
                    }
                )
        return rows

    def captures_out(self, s: Tx, caps: Sequence[Capture]) -> list[CaptureOut]:
        """Captures as answered, their reviews, references and eval names read once for all
        (a page of captures: three queries, not three per capture)."""
        reviews = capture_reviews(s, [c.id for c in caps])
        rows = [capture_rows(s, c, reviews) for c in caps]
        pairs = {(r.eval_id, r.eval_version) for part in rows for r in part}
        refs = version_refs(s, pairs)
        ids = {e for e, _ in pairs}
        names = eval_names(s, ids)
        return [self._capture_out(s, c, (r, refs, names)) for c, r in zip(caps, rows, strict=True)]

    def _capture_out(
        self,
        s: Tx,
        cap: Capture,
        read: tuple[list[Row], dict[tuple[int, int], list[str]], dict[int, str]] | None = None,
    ) -> CaptureOut:
        if read is None:
            return self.captures_out(s, [cap])[0]
        rows, refs, names = read
        results = []
        for r in rows:
            eval_id, version = cast(int, r.eval_id), cast(int, r.eval_version)
            ref_list = refs.get((eval_id, version), [])
            results.append(
                CaptureResultOut(
                    id=r.id,
                    eval_id=eval_id,
                    eval_name=names.get(eval_id, ""),
                    eval_version=version,
                    score=r.score,
                    passed=r.passed,
                    threshold=r.threshold,
                    fingerprint=r.fingerprint,
                    matched_index=r.matched_index,
                    matched_reference=ref_list[r.matched_index]
                    if r.matched_index < len(ref_list)
                    else "",
                    review=review_out(r.review),
                )
            )
        return CaptureOut.build(
            results,
            id=cap.id,
            input=cap.input,
            output=cap.output,
            conversation_id=cap.conversation_id,
            metadata=cap.meta,
            captured_at=as_utc(cap.captured_at),
            evaluated=cap.evaluated,
            capture_key=cap.capture_key,
        )

    def get_capture(self, capture_id: int) -> CaptureOut:
        """A stored capture with its results."""
        with self.store.read() as s:
            return self._capture_out(s, get_row(s, Capture, capture_id, "capture"))

    def list_captures(
        self,
        limit: int = 50,
        offset: int = 0,
        conversation_id: str | None = None,
        meta: str | Iterable[object] | None = None,
        since: object = None,
        until: object = None,
        cursor: str | None = None,
    ) -> list[CaptureOut]:
        """Captures, newest first, with their results; ``meta`` takes ``KEY=VALUE`` strings
        (all must hold), ``since``/``until`` ISO times or ages (``7d``); ``cursor``: a page's
        cursor (``page_captures``) instead of an ``offset``."""
        return self.page_captures(
            limit, offset, conversation_id, meta, since, until, cursor=cursor
        ).items

    def page_captures(
        self,
        limit: int = 50,
        offset: int = 0,
        conversation_id: str | None = None,
        meta: str | Iterable[object] | None = None,
        since: object = None,
        until: object = None,
        cursor: str | None = None,
    ) -> Page[CaptureOut]:
        """A page of ``list_captures`` with its ``next_cursor`` (older captures, None at the
        end) and ``prev_cursor`` (newer ones, None on the first page). A metadata filter on an
        indexed key is read from ``capture_meta``'s index (``simeval.service.capture_walk``)."""
        limit, offset = check_page(limit, offset)
        scope = _capture_scope(conversation_id, meta, since, until)
        at = page_position(cursor, offset, "captures", (datetime, int))
        with self.store.read() as s:

            def fetch(at: Position | None, n: int) -> list[Capture]:
                newest = at is None or at.direction == OLDER
                after = None if at is None else cast(tuple[datetime, int], at.key)
                skip = offset if at is None else 0
                first = min(n + skip, MOST_CHUNK)
                walk = capture_chunks(s, scope, newest=newest, after=after, first=first)
                return list(islice(chain.from_iterable(walk), skip, skip + n))

            page = keyset_page(
                "captures", fetch, lambda c: (c.captured_at, c.id), limit, at, offset > 0
            )
            items = self.captures_out(s, page.items)
            return Page(items, page.next_cursor, page.prev_cursor)

    def count_captures(
        self,
        conversation_id: str | None = None,
        meta: str | Iterable[object] | None = None,
        since: object = None,
        until: object = None,
    ) -> int:
        """How many captures ``list_captures`` gives with these filters and no limit (under
        one indexed metadata pair, summed by hour: ``simeval.service.meta_counts``)."""
        scope = _capture_scope(conversation_id, meta, since, until)
        with self.store.read() as s:
            rolled = rolled_capture_count(s, scope)
            return count_in_scope(s, scope) if rolled is None else rolled


def _capture_scope(
    conversation_id: object, meta: str | Iterable[object] | None, since: object, until: object
) -> CaptureScope:
    cid = None
    if conversation_id is not None:
        cid = check_storable(str(conversation_id), "conversation_id")
    return CaptureScope(
        meta=parse_meta(meta),
        since=parse_time(since, "since"),
        until=parse_time(until, "until"),
        conversation_id=cid,
    )


_KEY_RACE_RETRIES = 3


class _Unprepared(Exception):
    """The active evals of ``revision`` are not prepared yet (see ``_capture_batch``)."""

    def __init__(self, revision: int):
        super().__init__(revision)
        self.revision = revision


# the settings a capture reads with its flags (``read_flags``), in its transaction
_FLAG_KEYS = (REVISION_KEY, AUTO_EVALUATE_KEY, ROLLUP_KEY, INDEXED_META_KEY, META_WRITING_KEY)


def _json_flag(raw: object, default: Any) -> Any:
    """A setting's value as read through the driver (JSON text on SQLite)."""
    if raw is None:
        return default
    if isinstance(raw, str | bytes):
        return json.loads(raw)
    return raw


def _JSON_FLOAT(x: float) -> str:  # noqa: N802 - a constant-like helper
    # scores are finite (the engine clamps them to [0, 1]); repr is the shortest exact form
    return repr(x) if math.isfinite(x) else "null"
