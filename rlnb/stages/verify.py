"""The one way a reward function or verifier is called: under the run's time limit (``reward_time_limit``).

The Rewarder calls every reward function through ``call_limited``; held-out evaluation (``run/evaluate.py``,
so ``Trainer.evaluate``, ``rlnb train``'s eval and ``Lab.compare``) and VinePPO's prefix values
(``stages/credit.py``) score their completions through a Rewarder, so all of them share the time limit and the
``reward_on_error`` policy.

How the limit is enforced, and why two ways:

- no limit: the function runs in the caller's thread, untouched.
- on the main thread (a script, ``rlnb train``, a notebook cell): the function runs *in the main thread*, and a
  watchdog thread sends ``WATCHDOG_SIGNAL`` to it when the limit passes; its handler stops the function. Python
  lets only the main thread install signal handlers, so a verifier that sets its own ``SIGALRM`` timeout (as
  signal-based math verifiers do) keeps working here; the watchdog uses another signal so the two never meet.
  A real signal also wakes a blocking sleep or read, which a flag could not.
- on any other thread (the lab's play thread): the function runs in a helper thread that is abandoned when it
  overruns (Python cannot stop a thread). A verifier that installs a signal handler raises there, as it would in
  any non-main thread; that error is handled like any other, as ``reward_on_error`` says.
"""

from __future__ import annotations

import math
import signal
import threading

WATCHDOG_SIGNAL = getattr(signal, "SIGUSR2", None)  # not SIGALRM: verifiers set their own alarm
_watching = threading.local()  # a call already under the watchdog: a nested call uses a thread instead


class RewardFunctionError(ValueError):
    """A reward function raised or returned something that is not a finite number."""


class RewardTimeout(RewardFunctionError):
    """A reward function gave no result within the Rewarder's ``time_limit``."""


class _Overrun(BaseException):
    """Raised inside an overrunning function; a BaseException so a verifier's ``except Exception`` lets it pass."""


def check_time_limit(arg: str, value) -> float | None:
    """None (no limit) or a number of seconds > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{arg}: expected None (no limit) or a number of seconds > 0, got {value!r}")
    return float(value)


def call_limited(fn, *args, time_limit: float | None, name: str, **kwargs):
    """``fn(*args, **kwargs)`` given at most ``time_limit`` seconds (None: no limit). An overrun raises
    ``RewardTimeout`` naming the function ``name`` and the first completion (``args[0]``)."""
    if time_limit is None:
        return fn(*args, **kwargs)
    on_main = threading.current_thread() is threading.main_thread()
    if on_main and WATCHDOG_SIGNAL is not None and not getattr(_watching, "on", False):
        return _on_main_thread(fn, args, kwargs, time_limit, name)
    return _in_thread(fn, args, kwargs, time_limit, name)


def _timeout(name: str, time_limit: float, args) -> RewardTimeout:
    texts = args[0] if args else []
    first = f" (first {texts[0][:80]!r})" if texts and isinstance(texts[0], str) else ""
    return RewardTimeout(f"reward function {name!r}: no result within reward_time_limit={time_limit:g} s on "
                         f"{len(texts)} completions{first}; its call is stopped")


def _on_main_thread(fn, args, kwargs, time_limit, name):
    state = {"live": True, "fired": False}
    main = threading.main_thread().ident

    def handler(signum, frame):
        if state["live"]:  # a signal that arrives after the function returned is ignored
            state["fired"] = True
            raise _Overrun

    def alarm():
        if state["live"]:
            signal.pthread_kill(main, WATCHDOG_SIGNAL)

    previous = signal.signal(WATCHDOG_SIGNAL, handler)
    timer = threading.Timer(time_limit, alarm)
    _watching.on = True
    try:  # two levels: the watchdog's one signal may land in the inner cleanup; the outer one then runs whole
        try:
            timer.start()
            out = fn(*args, **kwargs)
        except BaseException:
            if not state["fired"]:  # the function's own error; after an overrun, what it raised is the overrun's
                raise
        finally:
            state["live"] = False
    except _Overrun:
        pass
    finally:
        state["live"] = False
        timer.cancel()
        timer.join()  # the watchdog has sent its signal, or never will, before the old handler is back
        _watching.on = False
        signal.signal(WATCHDOG_SIGNAL, previous)
    if state["fired"]:  # also when the function caught the overrun itself and returned something
        raise _timeout(name, time_limit, args) from None
    return out


def _in_thread(fn, args, kwargs, time_limit, name):
    box: dict = {}

    def work():
        try:
            box["out"] = fn(*args, **kwargs)
        except BaseException as e:  # handed to the caller's thread
            box["err"] = e

    th = threading.Thread(target=work, name=f"rlnb-reward-{name}", daemon=True)
    th.start()
    th.join(time_limit)
    if th.is_alive():
        raise _timeout(name, time_limit, args).with_traceback(None)
    if "err" in box:
        raise box["err"]
    return box["out"]
