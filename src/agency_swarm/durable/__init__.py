"""Durable turns on DBOS (the durable extra: `pip install ".[durable]"`): each top-level turn a
workflow on a queue in PostgreSQL, finished by whichever worker is alive, submitted idempotently, its events a stream
any process reads.

```python
from agency_swarm.durable import DurableTurns

turns = DurableTurns(agency, database_url="postgresql://app@db:5432/app", executor_id="worker-1")
await turns.launch()
handle = await turns.submit("Hello", chat_id="c1", key="client-request-17")  # the same key: the same turn
async for event in handle.events():  # from any process; `after=` an event id to pick up where a client left
    print(event.id, event.type)
result = await handle.result()  # a RunResult
```

Imports only the layers below it (the agency and turns); `serving` builds its durable mode on it.
docs/design/durable.md says what is exactly-once, what is at-least-once, and how a dead worker's turns finish.
"""

from .._base._extras import require_extra

require_extra("durable", "dbos", "asyncpg", needed_by="agency_swarm.durable")  # said before the modules using them

from .._base._errors import UnknownTurn  # noqa: E402
from ._observers import Observed, TurnObserver  # noqa: E402
from ._runner import DurableTurns, TurnFailed, TurnHandle, TurnStatus  # noqa: E402
from ._stream import DurableEvent  # noqa: E402

__all__ = [
    "DurableEvent", "DurableTurns", "Observed", "TurnFailed", "TurnHandle", "TurnObserver", "TurnStatus", "UnknownTurn",
]
