"""Eval definition files: export, import, and parsing and validating a document."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any, NotRequired, TypedDict

from simeval.checks import check_name, check_scope, check_storable_all, load_json, read_text_file
from simeval.errors import InvalidInput, InvalidOption, InvalidType
from simeval.scoring.options import DEFAULT_THRESHOLD, check_threshold
from simeval.scoring.scorer import check_references
from simeval.service.alert_rules import (
    RuleItem,
    export_alert_rules,
    store_alert_rules,
    validate_alert_rules,
)
from simeval.service.base import Core, Part
from simeval.service.evals import EvalService, is_pending
from simeval.service.models import ImportReport
from simeval.service.option_checks import check_options
from simeval.store import Tx
from simeval.store.evals_sql import list_evals
from simeval.store.lookups import eval_named
from simeval.yamlfile import read_yaml

EVALS_FORMAT = 1


class EvalTest(TypedDict):
    """An eval file entry's ``test``: a sample input and output."""

    input: str
    output: str


class EvalItem(TypedDict):
    """An eval as the eval file writes it (``export_evals``)."""

    name: str
    type: str
    status: str
    references: list[str]
    threshold: float
    input_scope: NotRequired[str]
    options: NotRequired[Mapping[str, object]]
    test: NotRequired[EvalTest]


class EvalsDocument(TypedDict):
    """An eval file's document (``EVALS_FORMAT``), as ``export_evals`` writes it."""

    simeval: int
    evals: list[EvalItem]
    alerts: NotRequired[list[RuleItem]]


class EvalEntry(TypedDict):
    """An eval file entry as ``validate_evals_document`` checked it."""

    name: str
    references: list[str]
    threshold: float
    input_scope: str | None
    options: dict[str, Any]  # as ``check_options`` gives them
    fingerprint: str
    status: str | None
    test: EvalTest | None


_EVAL_KEYS = {
    "name",
    "type",
    "status",
    "references",
    "reference",
    "threshold",
    "input_scope",
    "options",
    "test",
    "required",
    "synonyms",
}


def _shared_synonyms(doc: Mapping[str, object], source: str) -> dict[str, list[object]]:
    """The file's named synonym lists (its top-level ``synonyms:`` mapping: name -> groups)."""
    named = doc.get("synonyms") or {}
    if not isinstance(named, dict) or not all(isinstance(v, list) for v in named.values()):
        raise InvalidInput(
            f"{source}: 'synonyms' must map a list's name to its groups, e.g. "
            "'synonyms: {time: [[begin, commence, start]]}'"
        )
    return {str(k): v for k, v in named.items()}


def _terms_options(item: Mapping[str, object], named: Mapping[str, list[object]]) -> object:
    """An entry's ``options`` with its ``required`` and ``synonyms`` keys (which win); a
    string among its synonyms names a list of the file's ``synonyms:`` section."""
    options = item.get("options")
    if "required" not in item and "synonyms" not in item:
        return options
    out = dict(options) if isinstance(options, dict) else {}
    if options is not None and not isinstance(options, dict):
        raise InvalidOption(f"scorer options must be a mapping, not {type(options).__name__}")
    if "required" in item:
        out["required"] = item["required"]
    if "synonyms" in item:
        given = item["synonyms"]
        if not isinstance(given, list):
            raise InvalidOption(f"synonyms must be a list of groups or list names, not {given!r}")
        groups: list[object] = []
        for entry in given:
            if isinstance(entry, str) and "," not in entry:
                if entry not in named:
                    known = ", ".join(sorted(named)) or "none"
                    raise InvalidInput(
                        f"unknown synonym list {entry!r} (the file's 'synonyms:' names: {known}; "
                        "a group of words is a list: [[begin, commence]])"
                    )
                groups.extend(named[entry])
            else:
                groups.append(entry)
        out["synonyms"] = groups
    return out


def parse_evals_document(text: str | bytes, source: str = "document") -> object:
    """Parse an eval definitions file's text: JSON when ``source`` ends in ``.json``, else YAML
    (a superset of JSON). Errors name the line.

    >>> parse_evals_document("evals:\\n  - name: a\\n    references: [x]\\n")
    {'evals': [{'name': 'a', 'references': ['x']}]}
    """

    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput(f"{source} is not UTF-8 text (byte {exc.start})") from None
    if source.lower().endswith(".json"):
        try:
            return load_json(text, source)
        except json.JSONDecodeError as exc:
            raise InvalidInput(
                f"invalid JSON in {source} at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            ) from None
    return read_yaml(text, source)


def dump_evals_document(doc: object, fmt: str = "yaml") -> str:
    """An eval definitions document (``export_evals``) as the text of a file: YAML (keys in
    their order, Unicode as it is) or indented JSON; ``parse_evals_document`` reads it back.

    >>> print(dump_evals_document({"simeval": 1, "evals": []}, "json"))
    {
      "simeval": 1,
      "evals": []
    }
    <BLANKLINE>
    """
    if fmt == "json":
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    if fmt != "yaml":
        raise InvalidInput(f"eval file format must be yaml or json, not {fmt!r}")
    import yaml

    text: str = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=100)
    return text


def validate_evals_document(doc: object, source: str) -> list[EvalEntry]:
    """Every entry of a parsed eval definitions document checked, before anything is written:
    name, references, threshold, scope, options (with their fingerprint), status and test, as
    plain dicts. ``InvalidInput`` (or ``InvalidOption``/``InvalidType``) names ``source``, the
    entry and the problem."""
    if isinstance(doc, dict):
        fmt = doc.get("simeval", EVALS_FORMAT)
        if fmt != EVALS_FORMAT:
            raise InvalidInput(f"{source}: unknown eval file format {fmt!r} (this simeval reads 1)")
        extra = set(doc) - {"simeval", "evals", "synonyms", "alerts"}
        if extra:
            raise InvalidInput(f"{source}: unknown top-level key {sorted(extra)[0]!r}")
        items = doc.get("evals")
        named = _shared_synonyms(doc, source)
    else:
        items = doc
        named = {}
    if not isinstance(items, list):
        raise InvalidInput(f"{source}: expected a list of evals (under 'evals:')")
    out: list[EvalEntry] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        where = f"{source}: eval {i + 1}"
        if not isinstance(item, dict):
            raise InvalidInput(f"{where} is not a mapping")
        if "name" in item and isinstance(item["name"], str):
            where += f" ({item['name']!r})"
        unknown = set(item) - _EVAL_KEYS
        if unknown:
            raise InvalidInput(f"{where}: unknown key {sorted(unknown)[0]!r}")
        try:
            name = check_name(item.get("name"))
            if name in seen:
                raise InvalidInput(f"name {name!r} appears twice")
            seen.add(name)
            if item.get("type", "similarity") != "similarity":
                raise InvalidInput(f"type must be similarity, not {item.get('type')!r}")
            if "references" in item and "reference" in item:
                raise InvalidInput("give references or reference, not both")
            refs = check_references(item.get("references", item.get("reference")))
            check_storable_all(refs, "reference answer")
            threshold = check_threshold(item.get("threshold", DEFAULT_THRESHOLD))
            scope = check_scope(item.get("input_scope"))
            opts, fp = check_options(_terms_options(item, named))
            status = item.get("status")
            if status not in (None, "draft", "active", "archived"):
                raise InvalidInput(f"status must be draft, active or archived, not {status!r}")
            given = item.get("test")
            test: EvalTest | None = None
            if given is not None:
                if (
                    not isinstance(given, dict)
                    or set(given) - {"input", "output"}
                    or not isinstance(given.get("output"), str)
                ):
                    raise InvalidInput("test must be a mapping with input and output text")
                test = {"input": str(given.get("input") or ""), "output": given["output"]}
        except (InvalidInput, InvalidOption, InvalidType) as exc:
            raise type(exc)(f"{where}: {exc}") from None
        out.append(
            {
                "name": name,
                "references": refs,
                "threshold": threshold,
                "input_scope": scope,
                "options": opts,
                "fingerprint": fp,
                "status": status,
                "test": test,
            }
        )
    return out


class EvalFileService(Part):
    """Eval definition files: export and import."""

    def __init__(self, core: Core, evals: EvalService):
        super().__init__(core)
        self.evals = evals

    def export_evals(self, include_archived: bool = False) -> EvalsDocument:
        """The eval definitions as a YAML/JSON-ready document. Each carries its latest passing
        test of the current version (if any), so an import can activate it through the gate.

        A plain dict on purpose: it is the eval file format itself (``EVALS_FORMAT``), written
        as YAML or JSON and read back by ``import_evals``, not an answer about the store."""
        with self.store.read() as s:
            items: list[EvalItem] = []
            for ev in list_evals(s, None, include_archived):
                item: EvalItem = {
                    "name": ev.name,
                    "type": ev.type,
                    "status": ev.status,
                    "references": list(ev.references),
                    "threshold": ev.threshold,
                }
                if ev.input_scope is not None:
                    item["input_scope"] = ev.input_scope
                if ev.options:
                    item["options"] = dict(ev.options)
                test = self.evals.latest_test(s, ev, passed=True)
                if test is not None:
                    item["test"] = {"input": test.input, "output": test.output}
                items.append(item)
            alerts = export_alert_rules(s)
        doc: EvalsDocument = {"simeval": EVALS_FORMAT, "evals": items}
        if alerts:
            doc["alerts"] = alerts
        return doc

    def import_evals(
        self, doc_or_path: object, progress: Callable[[int, int], None] | None = None
    ) -> ImportReport:
        """Create or update evals from a document (a dict/list) or a YAML/JSON file path.

        Idempotent by name: an eval whose definition is unchanged is left alone, a changed one
        gets a new version. ``status: active`` activates through the usual gate, running the
        document's ``test`` when the current version has no passing test. The whole import is
        one transaction and every entry is validated before anything is written.
        Returns a report: created, updated, unchanged, activated, deactivated, archived,
        not_activated ({name: reason}).
        """
        doc: object
        if isinstance(doc_or_path, dict | list):
            doc = doc_or_path
            source = "document"
        elif isinstance(doc_or_path, str | os.PathLike):
            source = os.fspath(doc_or_path)
            doc = parse_evals_document(read_text_file(source, "evals"), source)
        else:
            raise InvalidType("import_evals takes a document (dict or list) or a file path")
        entries = validate_evals_document(doc, source)
        rules = validate_alert_rules(doc.get("alerts") if isinstance(doc, dict) else None, source)

        def work(s: Tx) -> ImportReport:
            report = ImportReport()  # made in the transaction: a retried one starts again
            for i, e in enumerate(entries):
                self._import_one(s, e, report)
                if progress:
                    progress(i + 1, len(entries))
            store_alert_rules(s, rules)  # the file's alert rules, replaced by name
            return report

        done: ImportReport = self._write(work)
        return done

    def _import_one(self, s: Tx, e: EvalEntry, report: ImportReport) -> None:
        name = e["name"]
        ev = eval_named(s, name)
        acted = False
        if ev is None:
            ev = self.evals.create_in(
                s,
                name,
                e["references"],
                e["threshold"],
                e["input_scope"],
                e["options"],
                e["fingerprint"],
            )
            report.created.append(name)
            before, acted = "draft", True
        else:
            before = ev.status
            wanted = {
                "references": e["references"],
                "threshold": e["threshold"],
                "input_scope": e["input_scope"],
                "options": e["options"],
                "fingerprint": e["fingerprint"],
            }
            if self.evals.edit_in(s, ev, wanted):
                report.updated.append(name)
                acted = True
        # no status in the file: keep the one the eval had (an edit may have made it a draft)
        status = e["status"] or before
        if status == "active" and (ev.status != "active" or is_pending(ev)):
            if ev.status == "archived":
                self.evals.set_status_in(s, ev, "draft")
            test = self.evals.latest_test(s, ev)
            if (test is None or not test.passed) and e["test"] is not None:
                self.evals.test_in(s, ev, e["test"]["input"], e["test"]["output"])
                test = self.evals.latest_test(s, ev)
            blocker = self.evals.blocker(ev, test)
            if blocker:
                report.not_activated[name] = blocker
            else:
                self.evals.activate_in(s, ev)  # a pending version switches over
                report.activated.append(name)
            acted = True
        elif status != "active" and ev.status != status:
            self.evals.set_status_in(s, ev, status)
            (report.deactivated if status == "draft" else report.archived).append(name)
            acted = True
        if not acted:
            report.unchanged.append(name)
