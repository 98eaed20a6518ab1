"""`make demo`: the whole system on a laptop, in under two minutes.

Starts the local cloud, deploys ``template.yaml``, sends a mixed workload
(duplicates, a short SES outage that makes jobs fail and retry, poison
messages), shows live progress and ends with a per-job report and the alarms
that fired. Modules: ``workload`` (what is sent), ``view`` (the live screen),
``report`` (the final tables), ``__main__`` (the run).
"""
