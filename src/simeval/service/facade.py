"""The ``Service`` façade: the parts of the service built over one ``Core`` and offered as one
object, and the process's registry of open services (``open_service``). Imported when
``simeval.service.Service`` is first used.

Each part is one concern (``EvalService``, ``CaptureService``, ``RunService``...) and its
constructor says what it needs: the core, and the parts it calls. The façade builds them once,
in the order they need each other, and each of its methods is a part's (``forward``): the
CLI, the HTTP API and the pages call one object, and a reader finds a method's code in the
part it names.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

from simeval.service.alerts import AlertService
from simeval.service.audit import AuditService
from simeval.service.backtest import BacktestService
from simeval.service.base import Core
from simeval.service.capture import CaptureService
from simeval.service.capture_batch import BatchService
from simeval.service.compare_sides import CompareService
from simeval.service.conversations import ConversationService
from simeval.service.datasets import DatasetService
from simeval.service.eval_calibration import CalibrationService
from simeval.service.eval_synonyms import SynonymService
from simeval.service.evalfiles import EvalFileService
from simeval.service.evals import EvalService
from simeval.service.export import ExportService
from simeval.service.overview import OverviewService
from simeval.service.results import ResultService
from simeval.service.review_queue import ReviewQueueService
from simeval.service.run_groups import RunGroupService
from simeval.service.runs import RunService
from simeval.service.settings import SettingsService
from simeval.service.trends import TrendService
from simeval.service.users import UserService
from simeval.store import resolve_db_url

P = ParamSpec("P")
R = TypeVar("R")


class forward(Generic[P, R]):  # noqa: N801 - read as a declaration, like ``property``
    """A method of the façade that is a part's: ``create_eval = forward("_evals",
    EvalService.create_eval)`` calls ``self._evals.create_eval``, with its signature and its
    docstring. On the class it is the part's function itself."""

    def __init__(self, part: str, method: Callable[Concatenate[Any, P], R]):
        self.part = part
        self.method = method
        self.name = method.__name__
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, obj: None, owner: type) -> Callable[Concatenate[Any, P], R]: ...

    @overload
    def __get__(self, obj: object, owner: type | None = None) -> Callable[P, R]: ...

    def __get__(self, obj: object | None, owner: type | None = None) -> Callable[..., R]:
        if obj is None:
            return self.method
        bound: Callable[P, R] = getattr(getattr(obj, self.part), self.name)
        return bound


class Service:
    """One database's evals, captures and results. Thread-safe; one per process is enough
    (``open_service``).

    A thin façade over the service's parts (``simeval.service.base.Part``), each a concern
    of its own module of this package: ``evals``, ``capture``, ``results``, ``runs``,
    ``datasets``, ``alerts``, ``users``... Each method below is a part's.
    """

    def __init__(self, db: str | os.PathLike[str] | None = None):
        core = Core(db)
        self._core = core
        self.url = core.url
        self.store = core.store
        # called with each committed batch of captures (``on_captured``)
        self.capture_listeners = core.capture_listeners
        self._evals = EvalService(core)
        self._eval_files = EvalFileService(core, self._evals)
        self._results = ResultService(core)
        self._calibration = CalibrationService(core, self._evals, self._results)
        self._synonyms = SynonymService(core, self._evals, self._results)
        self._backtest = BacktestService(core)
        self._captures = CaptureService(core)
        self._batches = BatchService(core, self._captures)
        self._conversations = ConversationService(core, self._captures)
        self._review_queue = ReviewQueueService(core, self._results)
        self._trends = TrendService(core)
        self._overview = OverviewService(core)
        self._compare = CompareService(core)
        self._export = ExportService(core)
        self._runs = RunService(core)
        self._run_groups = RunGroupService(core, self._results)
        self._datasets = DatasetService(core)
        self._settings = SettingsService(core)
        # alert rules and their alerts; users, their roles and keys: a part each, offered
        # whole (``svc.alerts.evaluate_alerts()``, ``svc.users.add_user(...)``)
        self.alerts = AlertService(core)
        self.users = UserService(core)
        self._audit = AuditService(core)

    def close(self) -> None:
        """Close the database connections."""
        self._core.close()
        with _SERVICES_LOCK:
            if _SERVICES.get(self.url) is self:
                del _SERVICES[self.url]

    def ping(self) -> None:
        """``Unavailable`` when the database cannot answer now (see ``Store.ping``)."""
        self.store.ping()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # EvalService
    create_eval = forward("_evals", EvalService.create_eval)
    get_eval = forward("_evals", EvalService.get_eval)
    list_evals = forward("_evals", EvalService.list_evals)
    eval_versions = forward("_evals", EvalService.eval_versions)
    edit_eval = forward("_evals", EvalService.edit_eval)
    test_eval = forward("_evals", EvalService.test_eval)
    activate_eval = forward("_evals", EvalService.activate_eval)
    deactivate_eval = forward("_evals", EvalService.deactivate_eval)
    archive_eval = forward("_evals", EvalService.archive_eval)
    # EvalFileService
    export_evals = forward("_eval_files", EvalFileService.export_evals)
    import_evals = forward("_eval_files", EvalFileService.import_evals)
    # CalibrationService
    calibrate_eval = forward("_calibration", CalibrationService.calibrate_eval)
    # SynonymService
    synonym_suggestions = forward("_synonyms", SynonymService.synonym_suggestions)
    add_synonyms = forward("_synonyms", SynonymService.add_synonyms)
    # BacktestService
    backtest_eval = forward("_backtest", BacktestService.backtest_eval)
    count_unscored = forward("_backtest", BacktestService.count_unscored)
    rescore = forward("_backtest", BacktestService.rescore)
    # CaptureService
    capture = forward("_captures", CaptureService.capture)
    capture_checked = forward("_captures", CaptureService.capture_checked)
    adopt_span = forward("_captures", CaptureService.adopt_span)
    merge_proxied = forward("_captures", CaptureService.merge_proxied)
    on_captured = forward("_captures", CaptureService.on_captured)
    get_capture = forward("_captures", CaptureService.get_capture)
    list_captures = forward("_captures", CaptureService.list_captures)
    page_captures = forward("_captures", CaptureService.page_captures)
    count_captures = forward("_captures", CaptureService.count_captures)
    # BatchService
    capture_many = forward("_batches", BatchService.capture_many)
    # ConversationService
    count_conversations = forward("_conversations", ConversationService.count_conversations)
    list_conversations = forward("_conversations", ConversationService.list_conversations)
    page_conversations = forward("_conversations", ConversationService.page_conversations)
    get_conversation = forward("_conversations", ConversationService.get_conversation)
    # ResultService
    list_results = forward("_results", ResultService.list_results)
    page_results = forward("_results", ResultService.page_results)
    count_results = forward("_results", ResultService.count_results)
    run_worst = forward("_results", ResultService.run_worst)
    get_result = forward("_results", ResultService.get_result)
    review_result = forward("_results", ResultService.review_result)
    # ReviewQueueService
    review_queue_next = forward("_review_queue", ReviewQueueService.review_queue_next)
    review_verdict = forward("_review_queue", ReviewQueueService.review_verdict)
    # TrendService
    recent_verdicts = forward("_trends", TrendService.recent_verdicts)
    trend = forward("_trends", TrendService.trend)
    # OverviewService
    overview = forward("_overview", OverviewService.overview)
    # CompareService
    compare = forward("_compare", CompareService.compare)
    metadata_values = forward("_compare", CompareService.metadata_values)
    # ExportService
    iter_export_rows = forward("_export", ExportService.iter_export_rows)
    iter_export = forward("_export", ExportService.iter_export)
    write_export = forward("_export", ExportService.write_export)
    export_results = forward("_export", ExportService.export_results)
    # RunService
    create_run = forward("_runs", RunService.create_run)
    update_run_summary = forward("_runs", RunService.update_run_summary)
    set_run_summary = forward("_runs", RunService.set_run_summary)
    add_run_results = forward("_runs", RunService.add_run_results)
    add_run_rows = forward("_runs", RunService.add_run_rows)
    discard_run = forward("_runs", RunService.discard_run)
    get_run = forward("_runs", RunService.get_run)
    delete_run = forward("_runs", RunService.delete_run)
    list_runs = forward("_runs", RunService.list_runs)
    page_runs = forward("_runs", RunService.page_runs)
    count_runs = forward("_runs", RunService.count_runs)
    iter_run_cases = forward("_runs", RunService.iter_run_cases)
    iter_run_rows = forward("_runs", RunService.iter_run_rows)
    # RunGroupService
    list_run_groups = forward("_run_groups", RunGroupService.list_run_groups)
    count_run_groups = forward("_run_groups", RunGroupService.count_run_groups)
    get_run_group = forward("_run_groups", RunGroupService.get_run_group)
    run_group_cases = forward("_run_groups", RunGroupService.run_group_cases)
    run_group_case = forward("_run_groups", RunGroupService.run_group_case)
    # DatasetService
    list_datasets = forward("_datasets", DatasetService.list_datasets)
    show_dataset = forward("_datasets", DatasetService.show_dataset)
    get_dataset_case = forward("_datasets", DatasetService.get_dataset_case)
    dataset_cases = forward("_datasets", DatasetService.dataset_cases)
    export_dataset = forward("_datasets", DatasetService.export_dataset)
    create_dataset = forward("_datasets", DatasetService.create_dataset)
    import_dataset = forward("_datasets", DatasetService.import_dataset)
    dataset_from_captures = forward("_datasets", DatasetService.dataset_from_captures)
    edit_dataset_case = forward("_datasets", DatasetService.edit_dataset_case)
    accept_dataset_draft = forward("_datasets", DatasetService.accept_dataset_draft)
    add_dataset_case = forward("_datasets", DatasetService.add_dataset_case)
    delete_dataset_case = forward("_datasets", DatasetService.delete_dataset_case)
    # SettingsService
    get_settings = forward("_settings", SettingsService.get_settings)
    update_settings = forward("_settings", SettingsService.update_settings)
    cleanup = forward("_settings", SettingsService.cleanup)
    # AuditService
    audit_log = forward("_audit", AuditService.audit_log)


_SERVICES: dict[str, Service] = {}
_SERVICES_LOCK = threading.Lock()


def open_service(db: str | os.PathLike[str] | None = None) -> Service:
    """The process's ``Service`` for ``db`` (path, URL, or None for the default), opened once
    (a service closed since is opened again)."""
    url = resolve_db_url(db)
    with _SERVICES_LOCK:
        svc = _SERVICES.get(url)
        if svc is None:
            svc = _SERVICES[url] = Service(url)
        return svc
