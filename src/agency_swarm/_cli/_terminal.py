"""The terminal chat behind `agency-swarm run`: streamed labelled lines, a spinner, Ctrl-C, tool approvals."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import select
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO, cast

from .._base._errors import AttachmentError, ChatPaused
from .._base._events import AgentStarted, ApprovalRequested, Event, MessageSent, TextDelta, ToolCalled, ToolOutput
from ._attach import ATTACH_COMMAND, attachment, describe, with_attachments
from ._demo import Printer, _short

if TYPE_CHECKING:
    from rich.console import Console
    from rich.status import Status

    from .._agency._agency import Agency
    from .._turn._results import Interruption, ResponseStream, RunResult

EXIT_WORDS = frozenset({"exit", "quit"})
"""Typed at any prompt (a message or a y/n question), like Ctrl-D: end the session."""
INTERRUPTED = 130
"""The shell's code for "stopped by Ctrl-C"."""


class ChatPrinter(Printer):
    """The demo's printer, plus approval requests; interactive chats do not echo what the user just typed."""

    def __init__(self, out: TextIO | io.TextIOBase, *, echo_user: bool) -> None:
        super().__init__(cast("TextIO", out))
        self.echo_user = echo_user
        self.resuming = False
        """A resumed turn first replays how it got to the paused calls; lines already shown are not repeated."""
        self._shown_calls: set[str] = set()

    def show(self, event: Event) -> None:
        match event:
            case ApprovalRequested(agent=agent, depth=depth, tool=tool, arguments=arguments):
                self._print(depth, f"{agent} wants to call {tool}({_short(arguments)}): waiting for your approval")
            case AgentStarted(depth=0) if self.resuming or not self.echo_user:
                pass
            case ToolCalled(tool="send_message"):
                pass  # message_sent follows; a refused send shows its tool_output
            case MessageSent(call_id=call_id) | ToolCalled(call_id=call_id) if call_id in self._shown_calls:
                pass
            case MessageSent(call_id=call_id) | ToolCalled(call_id=call_id):
                self._shown_calls.add(call_id)
                super().show(event)
            case _:
                super().show(event)
        self.out.flush()

    def say(self, text: str) -> None:
        self._print(0, text)
        self.out.flush()


class _HideSpinnerOnWrite(io.TextIOBase):
    """The chat's output: the spinner's line is cleared just before anything is written, and only then."""

    def __init__(self, out: TextIO, spinner: Spinner) -> None:
        self._out = out
        self._spinner = spinner

    def write(self, text: str) -> int:
        self._spinner.hide()
        return self._out.write(text)

    def flush(self) -> None:
        self._out.flush()

    def close(self) -> None:
        """The wrapped stream is the caller's: closing the wrapper, or its collection (which closes it), neither
        flushes nor closes it, so a wrapper outliving its stream (a test's capture, a closed pipe) raises nothing."""


class Spinner:
    """A rich status line while a model or tool is working; does nothing unless the console is a live terminal."""

    def __init__(self, console: Console | None) -> None:
        self._console = console
        self._status: Status | None = None
        self._running = False

    def show(self, text: str) -> None:
        if self._console is None:
            return
        if self._status is None:
            self._status = self._console.status(text)
        else:
            self._status.update(text)  # while running, only the text changes: no flicker
        if not self._running:
            self._status.start()
            self._running = True

    def hide(self) -> None:
        if self._running and self._status is not None:
            self._status.stop()
            self._running = False


def waiting_text(event: Event) -> str | None:
    """What the turn waits on after `event`, for the spinner; None while text is streaming."""
    match event:
        case AgentStarted(agent=agent) | ToolOutput(agent=agent):
            return f"{agent} is thinking..."
        case ToolCalled(agent=agent, tool=tool):
            return f"{agent} is running {tool}..."
        case MessageSent(recipient=recipient):
            return f"{recipient} is thinking..."
        case TextDelta():
            return None
        case _:
            return None


class QuitChat(Exception):
    """`exit`, `quit` or Ctrl-D at an approval question: end the session, leaving the turn paused (undecided)."""


@dataclass(kw_only=True)
class Outcome:
    """How one streamed turn (or resume) ended."""

    result: RunResult | None = None
    """None when the turn was cancelled."""
    exit_requested: bool = False
    """Ctrl-C was pressed again while the cancelled turn was being saved."""

    @property
    def cancelled(self) -> bool:
        return self.result is None


class TerminalChat:
    """One chat with an agency from a terminal. Turns run on the caller's `asyncio.Runner`; prompts are plain
    blocking reads between turns, so Ctrl-C at a prompt is an ordinary KeyboardInterrupt."""

    def __init__(
        self,
        agency: Agency,
        *,
        runner: asyncio.Runner,
        out: TextIO,
        agent: str | None = None,
        chat_id: str = "default",
        echo_user: bool = False,
        console: Console | None = None,
        read: Callable[[str], str] = input,
        report_error: Callable[[str], None] | None = None,
        echo_input: bool = False,
        attachments: list[dict[str, Any]] | None = None,
    ) -> None:
        self.agency = agency
        self.attachments = list(attachments or [])
        """Image and file parts that go with the next message (`--attach`, `/attach PATH`)."""
        self.runner = runner
        self.agent = agent or agency.entry_points[0].name
        self.chat_id = chat_id
        self.spinner = Spinner(console)
        self.printer = ChatPrinter(_HideSpinnerOnWrite(out, self.spinner), echo_user=echo_user)
        self._read = read
        self.echo_input = echo_input
        """Repeat what was read after its prompt: input from a pipe is not echoed by a terminal."""
        self.report_error = report_error or (lambda text: self.printer.say(f"Error: {text}"))

    def read(self, prompt: str) -> str:
        self.printer.end_line()
        self.printer.out.flush()
        line = self._read(prompt)
        if self.echo_input:
            self.printer.out.write(line + "\n")
        return line

    # -- whole sessions ----------------------------------------------------------------------------------
    def interact(self) -> int:
        """Decide what a paused chat waits for, then read messages until `exit`, Ctrl-D or Ctrl-C at a prompt;
        returns the exit code."""
        try:
            waited = self.settle_waiting_calls()
        except QuitChat:
            return 0
        if waited is not None and waited.exit_requested:
            return INTERRUPTED
        return self._read_messages()

    def settle_waiting_calls(self) -> Outcome | None:
        """A chat an earlier session left paused says so at once and asks for its decisions before any message
        (the resumed turn first shows how it got there); None when nothing waits."""
        manager = self.agency.thread_manager
        if manager.store is not None:
            self.runner.run(manager.ensure_loaded(self.chat_id))
        waiting = sum(len(calls) for calls in manager.waiting_calls(self.chat_id).values())
        if not waiting:
            return None
        calls = "a tool call waits" if waiting == 1 else f"{waiting} tool calls wait"
        self.printer.say(f"This chat is paused: {calls} for your approval. Decide first; then send your message.")
        return self._settle(self._run(lambda: self.agency.resume_stream(self.chat_id)))

    def _read_messages(self) -> int:
        while True:
            try:
                line = self.read("you: ").strip()
            except EOFError:
                self.printer.say("")
                return 0
            except KeyboardInterrupt:
                self.printer.say("")
                return INTERRUPTED
            if line in EXIT_WORDS:
                return 0
            if not line:
                continue
            if line == ATTACH_COMMAND or line.startswith(ATTACH_COMMAND + " "):
                self.attach(line.removeprefix(ATTACH_COMMAND).strip())
                continue
            try:
                outcome = self.send(line)
            except QuitChat:
                return 0
            except Exception as error:  # a failed turn ends that turn, not the chat
                self.report_error(f"{type(error).__name__}: {error}")
                continue
            if outcome.exit_requested:
                return INTERRUPTED

    def send_once(self, message: str) -> int:
        """One turn for scripts: 0 when it finished (or `exit` / end of input at an approval question left it
        paused), 130 when Ctrl-C cancelled it. Errors propagate."""
        try:
            outcome = self.send(message)
        except QuitChat:
            return 0
        return INTERRUPTED if outcome.cancelled else 0

    def attach(self, path: str) -> None:
        """`/attach PATH`: the file goes with the next message; a path that is no file the agency takes says why."""
        if not path:
            self.printer.say(f"Usage: {ATTACH_COMMAND} PATH (the file goes with your next message).")
            return
        try:
            part = attachment(path, self.agency.thread_manager.attachments.limits)
        except AttachmentError as error:
            self.report_error(str(error))
            return
        self.attachments.append(part)
        self.printer.say(describe(path, part))

    # -- one message ---------------------------------------------------------------------------------------
    def send(self, text: str) -> Outcome:
        """Stream the reply to `text` (with the files attached since the last message), asking for approvals
        whenever the turn pauses."""
        message, self.attachments = with_attachments(text, self.attachments), []
        while True:
            try:
                outcome = self._run(
                    lambda: self.agency.get_response_stream(message, self.agent, chat_id=self.chat_id)
                )
            except ChatPaused as paused:
                self.printer.say("The last turn of this chat is waiting for your approval; your message comes next.")
                outcome = self._settle(self._decide(paused.interruptions))
                if outcome.cancelled or outcome.exit_requested:
                    return outcome
                continue  # the old turn is finished: now send the message
            return self._settle(outcome)

    def _settle(self, outcome: Outcome) -> Outcome:
        while _paused(outcome) and not outcome.exit_requested:
            assert outcome.result is not None
            outcome = self._decide(outcome.result.interruptions)
        return outcome

    def _decide(self, interruptions: list[Interruption]) -> Outcome:
        """Ask y/n for each waiting call and resume the turn with the answers (once; the caller loops)."""
        approve: list[str] = []
        reject: list[str] = []
        for waiting in interruptions:
            try:
                (approve if self._ask(waiting) else reject).append(waiting.call_id)
            except KeyboardInterrupt:
                self.printer.say("\nNo decision: the turn stays paused; your next message asks again.")
                return Outcome(result=None)
        self.printer.resuming = True
        try:
            return self._run(lambda: self.agency.resume_stream(self.chat_id, approve=approve, reject=reject))
        finally:
            self.printer.resuming = False

    def _ask(self, waiting: Interruption) -> bool:
        question = f"Approve {waiting.agent}'s call {waiting.tool}({_short(waiting.arguments, 200)})? [y/n] "
        while True:
            try:
                answer = self.read(question).strip().lower()
            except EOFError:  # Ctrl-D, or a script's input ran out: quit, as `exit` does, deciding nothing
                self.printer.say("")
                answer = "exit"
            if answer in ("y", "yes"):
                return True
            if answer in ("n", "no"):
                return False
            if answer in EXIT_WORDS:
                self.printer.say("Quitting without a decision: the turn stays paused; run this chat again to decide.")
                raise QuitChat
            self.printer.say("Please answer y or n (or exit to quit, leaving the turn paused).")

    # -- one stream ----------------------------------------------------------------------------------------
    def _run(self, open_stream: Callable[[], ResponseStream]) -> Outcome:
        try:
            return self.runner.run(self._stream(open_stream))
        except KeyboardInterrupt:  # Ctrl-C landed before our handler was installed: asyncio cancelled the turn
            self.printer.say("Turn cancelled.")
            return Outcome(result=None)

    async def _stream(self, open_stream: Callable[[], ResponseStream]) -> Outcome:
        """Print the stream's events. First Ctrl-C: cancel the turn (what it produced stays saved); a second one
        while that clean-up runs asks to exit once it is done."""
        consumer = asyncio.create_task(self._consume(open_stream()))
        presses = 0

        def on_interrupt() -> None:
            nonlocal presses
            presses += 1
            if presses == 1:
                consumer.cancel()

        loop = asyncio.get_running_loop()
        handled = _handle_sigint(loop, on_interrupt)
        try:
            await asyncio.wait([consumer])
        finally:
            if not consumer.done():  # we were cancelled ourselves: stop the turn too, and wait for its clean-up
                consumer.cancel()
                await asyncio.wait([consumer])
            if handled:
                loop.remove_signal_handler(signal.SIGINT)
            self.spinner.hide()
            self.printer.end_line()
        if consumer.cancelled():
            self.printer.say("Turn cancelled; what it produced so far is saved.")
            return Outcome(result=None, exit_requested=presses > 1)
        return Outcome(result=consumer.result(), exit_requested=presses > 1)

    async def _consume(self, stream: ResponseStream) -> RunResult:
        try:
            self.spinner.show(f"{self.agent} is thinking...")
            async for event in stream:
                self.printer.show(event)  # hides the spinner if it prints anything
                waiting = waiting_text(event)
                if waiting is not None:
                    self.spinner.show(waiting)
        finally:
            self.spinner.hide()
            await stream.aclose()  # after a cancel: wait until the turn has saved what it produced
        return stream.result


def terminal_reader() -> Callable[[str], str]:
    """How to read a line: `read_terminal_line` on a POSIX terminal (main thread), else plain `input`."""
    usable = os.name == "posix" and threading.current_thread() is threading.main_thread()
    return read_terminal_line if usable and sys.stdin.isatty() else input


def read_terminal_line(prompt: str) -> str:
    """`input()` without its blind spot: a Ctrl-C that lands after the prompt is shown but before the read blocks
    is only noticed after Enter. Here the signal's wakeup byte ends the wait, so Ctrl-C always raises at once."""
    sys.stdout.write(prompt)
    sys.stdout.flush()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    previous = signal.set_wakeup_fd(wake_write)
    try:
        stdin = sys.stdin.fileno()
        while True:
            # A signal raises KeyboardInterrupt here (PEP 475 runs handlers when select is interrupted), or at the
            # next line when it arrived just before select blocked and only left its byte in the pipe.
            ready, _, _ = select.select([stdin, wake_read], [], [])
            if stdin in ready:
                data = os.read(stdin, 65536)  # a terminal in line mode returns one line per read
                if not data:
                    raise EOFError
                return data.decode(sys.stdin.encoding or "utf-8", "replace").removesuffix("\n")
            os.read(wake_read, 512)  # some other signal woke us: keep waiting
    finally:
        signal.set_wakeup_fd(previous)
        os.close(wake_read)
        os.close(wake_write)


def _paused(outcome: Outcome) -> bool:
    return outcome.result is not None and outcome.result.paused


def _handle_sigint(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> bool:
    """Route Ctrl-C to `callback` while a turn runs; False where the loop cannot (not the main thread, Windows)."""
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        loop.add_signal_handler(signal.SIGINT, callback)
        return True
    return False
