"""The operator console: ``sqsjobs console``, a local web page for the 3 a.m. page.

It shows what ``sqsjobs status`` and ``sqsjobs redrive`` already compute
(:mod:`sqsjobs.ops._status`, :mod:`sqsjobs.ops._redrive`), the job records of the
idempotency table, the EMF metrics through CloudWatch's ``GetMetricData``,
and chunked runs and scheduled leases; it redrives through the same engine.
Installed with the extra ``sqsjobs[console]`` (Starlette, uvicorn, Jinja2);
no runtime path of sqsjobs imports it, and the Lambda bundle leaves it out.

One concept per module:

- :mod:`~sqsjobs.console.config`: what the command was asked (host, token, queues);
- :mod:`~sqsjobs.console.sources`: the AWS clients and the resolved queues;
- :mod:`~sqsjobs.console.overview`, :mod:`~sqsjobs.console.dead_letters`,
  :mod:`~sqsjobs.ops._metrics_reader`, :mod:`~sqsjobs.console.job_record`,
  :mod:`~sqsjobs.console.runs`: one page's data each;
- :mod:`~sqsjobs.console.thresholds`: each queue's alarm limits;
- :mod:`~sqsjobs.console.redrive_actions`: dry run, confirm, the results journal;
- :mod:`~sqsjobs.console.charts`: SVG chart geometry, drawn on the server;
- :mod:`~sqsjobs.console.security`: token, CSRF, read-only, headers;
- :mod:`~sqsjobs.console.app` (routes) and :mod:`~sqsjobs.console.server` (uvicorn).
"""
