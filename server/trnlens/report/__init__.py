"""The run report: one self-contained HTML page per run or comparison (``trnlens report``).

Modules, each with one job: ``trace`` (one step out of a chrome trace, streamed), ``timeline``
(that step as lanes, gaps measured), ``model`` (everything a page shows, as plain values),
``svg`` and ``page`` (markup, every run-derived string through ``escape``), ``build`` (which runs,
where the file goes).
"""
