"""`make demo`: the whole system on a laptop, in under two minutes.

Starts the local cloud, deploys ``template.yaml``, sends a mixed workload
(duplicates, a short SES outage that makes jobs fail and retry, poison
messages), exercises the patterns (orders through the transactional outbox,
a chunked reindex, a schedule fired twice behind its lease, jobs enqueued
before their orders committed that dead-letter and are redriven once the
orders exist), shows live
progress and ends with a per-job report and the alarms that fired. Modules:
``workload`` (what is sent), ``patterns`` (the pattern steps and checks),
``view`` (the live screen), ``report`` (the final tables), ``__main__`` (the run).
"""
