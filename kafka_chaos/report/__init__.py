"""How a verdict is shown: the terminal table and ``results.json`` (``terminal``), the HTML
report (``html``, with ``data``, ``stats``, ``figures`` and ``cluster`` reading the history),
and ``junit.xml`` (``junit``). Renderers only: the verdict itself is ``kafka_chaos.verdict``."""
