"""The ``Service`` façade: every concern's mixin in one class, and the process's registry of
open services (``open_service``). Imported when ``simeval.service.Service`` is first used."""

from __future__ import annotations

import os

from simeval.service.alerts import AlertsMixin
from simeval.service.audit import AuditMixin
from simeval.service.backtest import BacktestMixin
from simeval.service.base import shared_service
from simeval.service.capture_batch import BatchMixin
from simeval.service.compare_sides import CompareMixin
from simeval.service.conversations import ConversationsMixin
from simeval.service.datasets import DatasetsMixin
from simeval.service.eval_calibration import CalibrationMixin
from simeval.service.eval_synonyms import SynonymsMixin
from simeval.service.evalfiles import EvalFilesMixin
from simeval.service.export import ExportMixin
from simeval.service.overview import OverviewMixin
from simeval.service.review_queue import ReviewQueueMixin
from simeval.service.run_groups import RunGroupsMixin
from simeval.service.runs import RunsMixin
from simeval.service.settings import SettingsMixin
from simeval.service.trends import TrendsMixin
from simeval.service.users import UsersMixin
from simeval.store import resolve_db_url


class Service(
    RunGroupsMixin,
    CompareMixin,
    ConversationsMixin,
    BacktestMixin,
    BatchMixin,
    ExportMixin,
    TrendsMixin,
    SettingsMixin,
    EvalFilesMixin,
    CalibrationMixin,
    RunsMixin,
    SynonymsMixin,
    DatasetsMixin,
    ReviewQueueMixin,
    OverviewMixin,
    AlertsMixin,
    UsersMixin,
    AuditMixin,
):
    """One database's evals, captures and results. Thread-safe; one per process is enough
    (``open_service``).

    A thin façade: each concern lives in its own module of this package (``evals``,
    ``capture``, ``batch``, ``results``, ``trends``, ``settings``, ``export``, ``evalfiles``,
    ``calibration``, ``runs``, ``datasets``, ``run_groups``, ``review_queue``), as a mixin
    over ``base.ServiceBase``.
    """


def open_service(db: str | os.PathLike[str] | None = None) -> Service:
    """The process's ``Service`` for ``db`` (path, URL, or None for the default), opened once."""
    return shared_service(resolve_db_url(db), Service)
