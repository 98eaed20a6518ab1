"""tests/otel: the trace tests run in a pytest of their own (test_traces_suite.py), never in this process.

They configure OpenTelemetry's SDK, which is process-wide (one global tracer provider) and turns tracing on
for everything after it (sqsjobs._otel): in this process every other test's messages would carry a trace.
"""

#: suite/ runs in a fresh interpreter, from test_traces_suite.py
collect_ignore = ["suite"]
