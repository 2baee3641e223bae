"""The sub-agents' tools, working on a small in-memory HR database that each run passes as its `context`."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from agents import RunContextWrapper


@dataclass(kw_only=True)
class Employee:
    name: str
    leave_days: int
    pay_stubs: list[str]
    benefits: list[str]


@dataclass(kw_only=True)
class LeaveBooking:
    employee_id: str
    start: date
    end: date
    days: int
    reason: str


@dataclass(kw_only=True)
class HRDatabase:
    employees: dict[str, Employee]
    bookings: list[LeaveBooking] = field(default_factory=list)

    def employee(self, employee_id: str) -> Employee:
        found = self.employees.get(employee_id)
        if found is None:
            raise ValueError(f"unknown employee id {employee_id!r}; ids look like E100")
        return found


def sample_database() -> HRDatabase:
    return HRDatabase(employees={
        "E100": Employee(
            name="Dana Whitfield", leave_days=12,
            pay_stubs=["2025-05-31: gross 5,200.00, net 3,870.15", "2025-06-30: gross 5,200.00, net 3,871.40"],
            benefits=["Health (family)", "Dental basic"],
        ),
        "E200": Employee(name="Ravi Menon", leave_days=2, pay_stubs=[], benefits=[]),
    })


HR = RunContextWrapper[HRDatabase]


async def get_leave_balance(ctx: HR, employee_id: str) -> str:
    employee = ctx.context.employee(employee_id)
    return f"{employee.name} ({employee_id}) has {employee.leave_days} leave days left."


async def submit_leave(ctx: HR, employee_id: str, start_date: str, end_date: str, reason: str) -> str:
    employee = ctx.context.employee(employee_id)
    start, end = date.fromisoformat(start_date), date.fromisoformat(end_date)
    if end < start:
        raise ValueError(f"end_date {end_date} is before start_date {start_date}")
    days = sum((start + timedelta(days=n)).weekday() < 5 for n in range((end - start).days + 1))
    if days > employee.leave_days:
        raise ValueError(f"{days} working days requested but only {employee.leave_days} left")
    employee.leave_days -= days
    ctx.context.bookings.append(
        LeaveBooking(employee_id=employee_id, start=start, end=end, days=days, reason=reason)
    )
    return f"Booked {days} working days ({start_date} to {end_date}); {employee.leave_days} days left."


async def latest_pay_stub(ctx: HR, employee_id: str) -> str:
    employee = ctx.context.employee(employee_id)
    if not employee.pay_stubs:
        return f"{employee.name} ({employee_id}) has no pay stubs yet."
    return f"Latest pay stub of {employee.name}: {employee.pay_stubs[-1]}."


async def list_benefits(ctx: HR, employee_id: str) -> str:
    employee = ctx.context.employee(employee_id)
    plans = ", ".join(employee.benefits) or "none"
    return f"{employee.name} is enrolled in: {plans}."


TOOL_FUNCTIONS: dict[str, Callable[..., Coroutine[Any, Any, str]]] = {
    function.__name__: function for function in (get_leave_balance, submit_leave, latest_pay_stub, list_benefits)
}
