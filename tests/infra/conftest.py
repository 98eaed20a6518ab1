"""Infra tests: the template, the cfn-lint rules and `sqsjobs check` (helpers in template_support.py)."""
