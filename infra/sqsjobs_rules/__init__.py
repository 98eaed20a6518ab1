"""cfn-lint rules that keep an sqsjobs template deployable safely.

cfn-lint loads the rule modules in this directory by path (``--append-rules``,
or ``append_rules`` in ``.cfnlintrc``); ``sqsjobs check`` finds the directory
through the installed package. The shared template reading lives in
``_wiring.py`` (underscore: cfn-lint does not load it as a rule file).
"""
