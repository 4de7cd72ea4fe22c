"""The commands of ``python -m harness``: one module per command.

Each module holds its command's argument parser (``add_parser(sub)``, which
adds it to the sub-commands of ``python -m harness`` and returns it) and its
``run(args) -> int`` (the exit status, ``harness.exits``). They are the only
place that ties campaigns, checks and reports together; ``harness.cli`` only
assembles them. ``options`` holds what several commands share (the campaign
options, their validation, run ids).

- ``chaos``: the default campaign, then the self-check;
- ``trial`` and ``replay``: one trial, from its arguments or its folder;
- ``compare``: the same campaign against several runtimes;
- ``audit``: a campaign for a time budget, then Hypothesis (``make audit``);
- ``merge``: one report from the run folders of shards;
- ``bench``: the benchmarks (also ``python -m harness.bench``, ``make bench``).
"""
