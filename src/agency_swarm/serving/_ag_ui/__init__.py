"""AG-UI for an agency (`create_app(..., ag_ui=True)`, `pip install ".[ag-ui]"`): `POST /ag-ui` takes
a `RunAgentInput` and streams `ag_ui.core` events; docs/ag-ui.md has the event mapping."""

from ._route import add_ag_ui_route

__all__ = ["add_ag_ui_route"]
