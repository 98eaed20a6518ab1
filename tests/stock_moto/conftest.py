"""tests/stock_moto: the outer test runs project/ as a user's own project, in a pytest of its own."""

#: project/ is a user's project, run by test_users_stock_moto_suite.py in a fresh interpreter: never here
collect_ignore = ["project"]
