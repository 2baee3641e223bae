"""What operators see of turns: OpenTelemetry spans and Prometheus metrics, each switched on by a setting.

The turn loop asks `ACTIVE` (one module attribute) once per turn; None, the default, costs nothing more.
"""
