"""The persistent job queue for recap work, and the worker that runs it."""

from autorecap.jobs.context import WorkerStats
from autorecap.jobs.handlers import enqueue_pipeline
from autorecap.jobs.queue import Job, JobError, JobQueue
from autorecap.jobs.runner import Worker

__all__ = ["Job", "JobError", "JobQueue", "Worker", "WorkerStats", "enqueue_pipeline"]
