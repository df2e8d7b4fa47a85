"""The command lines: ``arc-train`` (:mod:`arc_jax.cli.train`), ``arc-evaluate``
(:mod:`arc_jax.cli.evaluate`) and ``arc-report`` (:mod:`arc_jax.cli.report`), installed by
``pip install .``; ``experiments/*.py`` run the same in a checkout."""
