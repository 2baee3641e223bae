"""The built-in web chat page (`create_app(ui=True)`, `agency-swarm serve --ui`): one page, its script and style."""

from ._routes import UI_PUBLIC_PATHS, add_ui_routes

__all__ = ["UI_PUBLIC_PATHS", "add_ui_routes"]
