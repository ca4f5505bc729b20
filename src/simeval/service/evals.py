"""The eval lifecycle: create, edit (a new version each time), test, activate, deactivate,
archive, versions, listing with stats."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from simeval.checks import (
    UNSET,
    Unset,
    as_utc,
    check_name,
    check_scope,
    check_storable_all,
    check_texts,
    utc_now,
)
from simeval.errors import Conflict, InvalidInput
from simeval.jsontypes import JSONObject
from simeval.scoring.analyzer import scope_key
from simeval.scoring.evalset import EvalSet, EvalSpec
from simeval.scoring.options import DEFAULT_THRESHOLD, check_threshold, strictness
from simeval.scoring.scorer import check_references, get_scorer
from simeval.service.actor import current_actor, record
from simeval.service.base import Part
from simeval.service.models import EvalOut, EvalStats, EvalVersionOut, TestOut
from simeval.service.option_checks import check_options
from simeval.service.settings import REVISION_KEY
from simeval.store import Eval, EvalTest, EvalVersion, Tx
from simeval.store.evals_sql import (
    add_eval,
    add_test,
    add_version,
    eval_id_named,
    eval_versions,
    latest_test,
    latest_tests,
    list_evals,
)
from simeval.store.rollups import tally_totals
from simeval.store.settings_sql import bump_counter


def is_pending(ev: Eval) -> bool:
    """An active eval edited since: its current version waits for a test and an activation
    while ``active_version`` keeps scoring."""
    return ev.status == "active" and ev.active_version not in (None, ev.version)


def _version_row(ev: Eval, changes: dict[str, Any]) -> EvalVersion:
    """The eval's current version as the row kept for ever, with what changed."""
    return EvalVersion(
        eval_id=ev.id,
        version=ev.version,
        references=ev.references,
        threshold=ev.threshold,
        input_scope=ev.input_scope,
        options=ev.options,
        fingerprint=ev.fingerprint,
        changes=changes,
        created_at=ev.updated_at,
        created_by=current_actor(),
    )


def _edit_entry(ev: Eval, changes: Mapping[str, object]) -> tuple[str, str, dict[str, object]]:
    """The audit entry of an edit: ``eval.threshold`` when only the threshold changed (with
    its old and new value), else ``eval.edit`` naming the fields (and a rename or threshold's
    values; references and options may be long: the eval's versions keep them whole)."""
    fields = sorted(set(changes) - {"pending", "fingerprint"})
    detail: dict[str, object] = {"version": ev.version, "fields": fields}
    for key in ("threshold", "name"):
        if key in changes:
            detail[key] = changes[key]
    action = "eval.threshold" if fields == ["threshold"] else "eval.edit"
    return action, f"eval:{ev.name}", detail


class EvalService(Part):
    """The eval lifecycle."""

    def latest_test(self, s: Tx, ev: Eval, passed: bool = False) -> EvalTest | None:
        """The latest test of the eval's current version (the latest passing one if asked)."""
        return latest_test(s, ev.id, ev.version, passed)

    @staticmethod
    def blocker(ev: Eval, test: EvalTest | None) -> str | None:
        if ev.status == "active" and not is_pending(ev):
            return None
        if ev.status == "archived":
            return f"eval {ev.name!r} is archived: restore it with deactivate first"
        if test is None:
            return (
                f"eval {ev.name!r} has no test of its current version {ev.version}: run a test "
                "that passes, then activate"
            )
        if not test.passed:
            return (
                f"the latest test of eval {ev.name!r} version {ev.version} failed (score "
                f"{test.score:.4f} below the threshold {test.threshold:.2f}): run a test that "
                "passes, then activate"
            )
        return None

    def _test_out(self, ev_name: str, t: EvalTest, references: list[str]) -> TestOut:
        return TestOut(
            id=t.id,
            eval_name=ev_name,
            version=t.version,
            input=t.input,
            output=t.output,
            score=t.score,
            passed=t.passed,
            threshold=t.threshold,
            matched_index=t.matched_index,
            matched_reference=references[t.matched_index]
            if 0 <= t.matched_index < len(references)
            else "",
            explanation=t.explanation,
            missing_required=list((t.explanation or {}).get("missing_required") or []),
            fingerprint=t.fingerprint,
            in_scope=t.in_scope,
            created_at=as_utc(t.created_at),
        )

    def _stats(self, s: Tx, eval_ids: Sequence[int]) -> dict[int, EvalStats]:
        if not eval_ids:
            return {}
        out = {}
        for eval_id, sums in tally_totals(s, eval_ids).items():
            count = sums.count
            if count:
                out[eval_id] = EvalStats(
                    results=count, pass_rate=sums.passes / count, mean_score=sums.total / count
                )
        return out

    def _eval_out(
        self,
        s: Tx,
        ev: Eval,
        test: EvalTest | Unset | None = UNSET,
        stats: EvalStats | Unset | None = UNSET,
    ) -> EvalOut:
        if isinstance(test, Unset):
            test = self.latest_test(s, ev)
        if isinstance(stats, Unset):
            stats = self._stats(s, [ev.id]).get(
                ev.id, EvalStats(results=0, pass_rate=None, mean_score=None)
            )
        blocker = self.blocker(ev, test)
        return EvalOut(
            id=ev.id,
            name=ev.name,
            type="similarity",
            status=ev.status,  # type: ignore[arg-type]
            version=ev.version,
            references=list(ev.references),
            threshold=ev.threshold,
            strictness=strictness(ev.threshold),
            input_scope=ev.input_scope,
            options=dict(ev.options),
            required=list(ev.options.get("required") or []),
            synonyms=[list(g) for g in ev.options.get("synonyms") or []],
            fingerprint=ev.fingerprint,
            created_at=as_utc(ev.created_at),
            updated_at=as_utc(ev.updated_at),
            can_activate=(ev.status == "draft" or is_pending(ev)) and blocker is None,
            active_version=(ev.active_version or ev.version) if ev.status == "active" else None,
            pending_version=ev.version if is_pending(ev) else None,
            activation_blocker=blocker,
            last_test=self._test_out(ev.name, test, ev.references) if test else None,
            stats=stats,
        )

    def _bump_revision(self, s: Tx) -> None:
        """Tell every process's capture cache that the evals changed."""
        bump_counter(s, REVISION_KEY)

    # -- evals ----------------------------------------------------------------------------------
    def create_eval(
        self,
        name: str,
        references: str | Sequence[str],
        threshold: float | str = DEFAULT_THRESHOLD,
        input_scope: str | None = None,
        options: Mapping[str, object] | None = None,
    ) -> EvalOut:
        """Create a draft eval (version 1).

        ``references``: one reference answer or a list (the best match scores); ``threshold``
        a number in [0, 1] or its text (as a form or a command line gives it). Raises
        ``Conflict`` for a name in use, ``InvalidInput`` for an empty name or reference or a
        threshold outside [0, 1], ``InvalidOption`` for a bad scorer option.
        """
        clean = check_name(name)
        refs = check_references(references)
        check_storable_all(refs, "reference answer")
        limit = check_threshold(threshold)
        scope = check_scope(input_scope)
        opts, fp = check_options(options)

        def work(s: Tx) -> EvalOut:
            ev = self.create_in(s, clean, refs, limit, scope, opts, fp)
            return self._eval_out(
                s, ev, test=None, stats=EvalStats(results=0, pass_rate=None, mean_score=None)
            )

        return self._write(work)

    def create_in(
        self,
        s: Tx,
        name: str,
        refs: list[str],
        threshold: float,
        scope: str | None,
        opts: JSONObject,
        fp: str,
    ) -> Eval:
        if eval_id_named(s, name) is not None:
            raise Conflict(f"an eval named {name!r} already exists")
        now = utc_now()
        ev = Eval(
            name=name,
            type="similarity",
            status="draft",
            version=1,
            references=refs,
            threshold=threshold,
            input_scope=scope,
            options=opts,
            fingerprint=fp,
            created_at=now,
            updated_at=now,
        )
        add_eval(s, ev)
        add_version(s, _version_row(ev, {"created": True}))
        self._bump_revision(s)
        record(s, "eval.create", f"eval:{name}", version=1, threshold=threshold)
        return ev

    def get_eval(self, name_or_id: str | int) -> EvalOut:
        """An eval by name (or id), with its latest test and its stats."""
        with self.store.read() as s:
            return self._eval_out(s, self._find_eval(s, name_or_id))

    def list_evals(
        self, status: str | None = None, include_archived: bool = False
    ) -> list[EvalOut]:
        """Evals by name; archived ones only when asked (or with ``status="archived"``)."""
        if status is not None and status not in ("draft", "active", "archived"):
            raise InvalidInput(f"status must be draft, active or archived, not {status!r}")
        with self.store.read() as s:
            evs = list_evals(s, status, include_archived)
            ids = [e.id for e in evs]
            stats = self._stats(s, ids)
            tests = latest_tests(s, ids)
            empty = EvalStats(results=0, pass_rate=None, mean_score=None)
            return [self._eval_out(s, e, tests.get(e.id), stats.get(e.id, empty)) for e in evs]

    def eval_versions(self, name: str | int) -> list[EvalVersionOut]:
        """Every version of an eval, oldest first, with what each one changed."""
        with self.store.read() as s:
            ev = self._find_eval(s, name)
            rows = eval_versions(s, ev.id)
            return [
                EvalVersionOut(
                    version=v.version,
                    created_at=as_utc(v.created_at),
                    changes=v.changes,
                    references=list(v.references),
                    threshold=v.threshold,
                    input_scope=v.input_scope,
                    options=dict(v.options),
                    fingerprint=v.fingerprint,
                    created_by=v.created_by,
                )
                for v in rows
            ]

    def edit_eval(
        self,
        name: str | int,
        *,
        new_name: str | None = None,
        references: str | Sequence[str] | None = None,
        threshold: float | str | None = None,
        input_scope: object = UNSET,
        options: Mapping[str, object] | None = None,
    ) -> EvalOut:
        """Change an eval; any change makes a new version that records what changed.

        ``input_scope=None`` removes the scope (leave it out to keep it); ``options={}`` resets
        the scorer options to the defaults. Changing what scores (references, threshold,
        scope, options) of an active eval makes the new version *pending*: the version in
        force (``active_version``) keeps scoring captures until a test of the new version
        passes and ``activate_eval`` switches over.
        """
        changes_in: dict[str, object] = {}
        if new_name is not None:
            changes_in["name"] = check_name(new_name)
        if references is not None:
            refs = changes_in["references"] = check_references(references)
            check_storable_all(refs, "reference answer")
        if threshold is not None:
            changes_in["threshold"] = check_threshold(threshold)
        if not isinstance(input_scope, Unset):
            changes_in["input_scope"] = check_scope(input_scope)
        if options is not None:
            changes_in["options"], changes_in["fingerprint"] = check_options(options)

        def edit(s: Tx, ev: Eval) -> None:
            if ev.status == "archived":
                raise Conflict(f"eval {ev.name!r} is archived: restore it with deactivate first")
            self.edit_in(s, ev, changes_in)

        return self._change_eval(name, edit)

    def _change_eval(self, name: str | int, change: Callable[[Tx, Eval], object]) -> EvalOut:
        """``change(session, eval)`` in a write transaction; the eval as it is then."""

        def work(s: Tx) -> EvalOut:
            ev = self._find_eval(s, name)
            change(s, ev)
            return self._eval_out(s, ev)

        out: EvalOut = self._write(work)
        return out

    def edit_in(self, s: Tx, ev: Eval, wanted: dict[str, Any]) -> dict[str, Any]:
        changes: dict[str, Any] = {}
        for key in ("name", "references", "threshold", "input_scope", "options", "fingerprint"):
            if key in wanted and wanted[key] != getattr(ev, key):
                changes[key] = {"from": getattr(ev, key), "to": wanted[key]}
        if not changes:
            return {}
        if "name" in changes and eval_id_named(s, wanted["name"], not_id=ev.id) is not None:
            raise Conflict(f"an eval named {wanted['name']!r} already exists")
        for key, change in changes.items():
            setattr(ev, key, change["to"])
        scoring = set(changes) - {"name"}
        if scoring and ev.status == "active":
            # a live edit: the version in force keeps scoring captures; the new one is
            # pending until a test of it passes and it is activated
            if ev.active_version is None:
                ev.active_version = ev.version
            changes["pending"] = {"active_version": ev.active_version}
        ev.version += 1
        ev.updated_at = utc_now()
        add_version(s, _version_row(ev, changes))
        self._bump_revision(s)
        action, target, detail = _edit_entry(ev, changes)
        record(s, action, target, **detail)
        return changes

    def test_eval(self, name: str | int, input: str, output: str) -> TestOut:
        """Score a sample input/output with the eval's current version, store and return it
        (with the full explanation)."""
        check_texts(input, output)

        def work(s: Tx) -> TestOut:
            ev = self._find_eval(s, name)
            return self.test_in(s, ev, input, output)

        return self._write(work)

    def test_in(self, s: Tx, ev: Eval, input: str, output: str) -> TestOut:
        spec = EvalSpec(ev.id, ev.name, ev.version, tuple(ev.references), ev.threshold, None,
                        tuple(sorted(ev.options.items())))  # fmt: skip
        # scored as captures are (the eval-set scorer, with the input), explained beside it
        (scored,) = EvalSet([spec]).score(output, input=input)
        scorer = get_scorer(**ev.options)
        exp = scorer.explain(output, ev.references, top=10, input=input)
        in_scope = ev.input_scope is None or scope_key(input) == scope_key(ev.input_scope)
        test = EvalTest(
            eval_id=ev.id,
            version=ev.version,
            input=input,
            output=output,
            score=scored.score,
            passed=scored.passed,
            threshold=ev.threshold,
            matched_index=scored.matched_index,
            explanation=exp.to_dict(),
            fingerprint=scorer.fingerprint,
            in_scope=in_scope,
            created_at=utc_now(),
        )
        add_test(s, test)
        return self._test_out(ev.name, test, ev.references)

    def activate_eval(self, name: str | int) -> EvalOut:
        """Make an eval score every matching capture. ``Conflict`` (saying why) unless the
        latest test of its current version passed."""
        return self._change_eval(name, self.activate_in)

    def activate_in(self, s: Tx, ev: Eval) -> bool:
        if ev.status == "active" and not is_pending(ev):
            return False
        blocker = self.blocker(ev, self.latest_test(s, ev))
        if blocker:
            raise Conflict(f"cannot activate: {blocker}")
        if ev.status == "active":  # switch over to the pending version
            ev.active_version = None
            ev.updated_at = utc_now()
            self._bump_revision(s)
            record(s, "eval.activate", f"eval:{ev.name}", version=ev.version)
            return True
        self.set_status_in(s, ev, "active")
        return True

    def set_status_in(self, s: Tx, ev: Eval, status: str) -> bool:
        if ev.status == status:
            return False
        ev.active_version = None  # leaving "active" drops a pending switch-over
        before, ev.status = ev.status, status
        ev.updated_at = utc_now()
        self._bump_revision(s)
        action = {"active": "activate", "draft": "deactivate", "archived": "archive"}[status]
        record(s, f"eval.{action}", f"eval:{ev.name}", version=ev.version, was=before)
        return True

    def deactivate_eval(self, name: str | int) -> EvalOut:
        """Stop an eval scoring captures (status draft); also restores an archived eval."""
        return self._change_eval(name, lambda s, ev: self.set_status_in(s, ev, "draft"))

    def archive_eval(self, name: str | int) -> EvalOut:
        """Hide an eval from listings and stop it scoring; its results are kept."""
        return self._change_eval(name, lambda s, ev: self.set_status_in(s, ev, "archived"))
