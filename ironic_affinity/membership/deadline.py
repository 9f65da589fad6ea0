# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""A client call with a deadline, for the calls tooz gives none.

Most tooz calls return a result whose ``get(timeout=)`` bounds the wait.
A few block in the calling thread for as long as the driver likes:
``heartbeat()`` on ZooKeeper waits until kazoo reconnects, however long
the server is away, and ``start()`` on Redis retries a refused
connection for about a minute. :func:`call_within` runs such a call in a
thread of its own, so that the caller can stop waiting.

A call given up on is still inside the client. Using the client again
meanwhile would put two threads in it, which tooz clients do not
survive: so the caller gives the client up with the call, and the
call's thread runs ``late`` (discarding the client, say) once the call
has returned, as the last use of the client. ``late`` gets the call's
error, if it failed: the reason a backend does not answer (a refused
certificate, say) may come only then.
"""

from collections.abc import Callable
import threading
from typing import Any
from typing import TypeVar

T = TypeVar('T')


class NoAnswer(Exception):
    """The call did not return within its deadline; it still runs."""


def call_within(
    seconds: float,
    call: Callable[[], T],
    late: Callable[[BaseException | None], Any],
) -> T:
    """``call()``'s result, or its error, if it returns within ``seconds``.

    :param late: run in the call's thread after ``call()`` returns, with
        its error or None, only if this function gave up waiting for it
        first.
    :raises: NoAnswer when the deadline passed first.
    """
    done = threading.Event()
    lock = threading.Lock()
    outcome: dict[str, Any] = {}
    abandoned = False

    def run() -> None:
        try:
            outcome['value'] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome['error'] = exc
        # Under the lock, so that the caller either takes the outcome or
        # leaves the clean-up to this thread, never both nor neither.
        with lock:
            done.set()
            late_now = abandoned
        if late_now:
            _run_late(late, outcome.get('error'))

    threading.Thread(target=run, name='affinity-call', daemon=True).start()
    done.wait(seconds)
    with lock:
        if not done.is_set():
            abandoned = True
            raise NoAnswer('no answer within %s s' % seconds)
    if 'error' in outcome:
        raise outcome['error']
    return outcome['value']  # type: ignore[no-any-return]


def _run_late(
    late: Callable[[BaseException | None], Any], error: BaseException | None
) -> None:
    # Nobody waits for this thread any more: an error would only end
    # it with a traceback on stderr.
    try:
        late(error)
    except Exception:  # noqa: BLE001, S110 - clean-up of a given-up call
        pass
