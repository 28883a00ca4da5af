"""Command-line interface: ``main`` discovers one module per command group in this package.

A command module defines ``register(subparsers)``, which adds its parser(s) with ``set_defaults(func=...)``;
the handler takes the parsed args and returns an exit code. Handlers import heavy libraries lazily, so
``autoshard --help`` stays fast.
"""
