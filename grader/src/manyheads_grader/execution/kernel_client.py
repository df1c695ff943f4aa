"""The kernel manager nbgrader's Execute uses when grading (``--Execute.kernel_manager_class``): jupyter_client's,
without its fixed waits.

jupyter_client sleeps a fixed time twice in every kernel's life, which for a notebook of a few fast cells is a third of
its time and no work at all (measured: a forked kernel starts in about 0.19 s and its notebook runs in about 0.18 s):

* at the start, after the kernel answers ``kernel_info``, it reads IOPub until the channel has been quiet for 0.2 s;
  here it reads until the kernel's ``idle`` status for that request (the last message the kernel sends for it) and
  keeps the 0.2 s only as the limit when that message does not come;
* at the end, it checks whether the kernel's process has exited every 0.1 s; here every 5 ms.

Everything else (the requests, what counts as ready, the time limits, how a kernel that does not stop is terminated
and killed) is jupyter_client's own code.
"""

from __future__ import annotations

import time
from queue import Empty
from typing import Any

from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.utils import ensure_async
from traitlets import DottedObjectName, Type

MANAGER = "manyheads_grader.execution.kernel_client.PromptKernelManager"  # for --Execute.kernel_manager_class
EXIT_POLL_S = 0.005  # how often the end of a kernel's process is checked (jupyter_client: 0.1 s)
QUIET_S = 0.2  # jupyter_client's wait for IOPub to fall quiet: here only the limit


class PromptKernelClient(AsyncKernelClient):
    async def wait_for_ready(self, timeout: float | None = None) -> None:
        """As jupyter_client's (a kernel_info reply on shell, IOPub connected), then IOPub read up to the kernel's
        ``idle`` for the request that was answered instead of until 0.2 s of silence."""
        deadline = time.time() + (float("inf") if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                msg = await ensure_async(self.shell_channel.get_msg(timeout=1))
            except Empty:
                msg = None
            if msg is not None and msg["msg_type"] == "kernel_info_reply":
                try:  # IOPub connected? (jupyter_client starts over when it is not)
                    first = await ensure_async(self.iopub_channel.get_msg(timeout=QUIET_S))
                except Empty:
                    pass
                else:
                    self._handle_kernel_info_reply(msg)
                    await self._drain_iopub(msg["parent_header"].get("msg_id"), first)
                    return
            if not await ensure_async(self.is_alive()):
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.time() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")

    async def _drain_iopub(self, request: str | None, msg: dict[str, Any]) -> None:
        """Read IOPub until the kernel's idle status for ``request``, or until it is quiet for :data:`QUIET_S`."""
        while not _idle_for(msg, request):
            try:
                msg = await ensure_async(self.iopub_channel.get_msg(timeout=QUIET_S))
            except Empty:
                return


def _idle_for(msg: dict[str, Any], request: str | None) -> bool:
    return (
        request is not None
        and msg.get("msg_type") == "status"
        and msg.get("content", {}).get("execution_state") == "idle"
        and msg.get("parent_header", {}).get("msg_id") == request
    )


class PromptKernelManager(AsyncKernelManager):
    client_class = DottedObjectName("manyheads_grader.execution.kernel_client.PromptKernelClient", config=True)
    client_factory = Type(PromptKernelClient, klass=AsyncKernelClient, config=True)

    async def _async_finish_shutdown(
        self, waittime: float | None = None, pollinterval: float = EXIT_POLL_S, restart: bool = False
    ) -> None:
        await super()._async_finish_shutdown(waittime, pollinterval, restart)

    finish_shutdown = _async_finish_shutdown
