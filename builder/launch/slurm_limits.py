"""The limits of a `trainimg slurm` job as sbatch reads them (pure): the time limit in seconds,
the grace before it, and how many times the job may requeue itself.

sbatch(1): --time is MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS, DAYS-HOURS,
DAYS-HOURS:MINUTES or DAYS-HOURS:MINUTES:SECONDS, 0 (or UNLIMITED, INFINITE) for none; the
signal time of --signal=B:TERM@S is 0-65535 seconds. A grace as long as the limit would signal
the job as it starts, so it is refused here rather than discovered there.
"""

from __future__ import annotations

import re

from builder.launch.request import LaunchError

DEFAULT_MAX_RESTARTS = 3
# the trainer's "stopped, nothing saved" (trainer/errors.py; the builder never imports the
# trainer, tests/launch/test_slurm.py holds the two equal): what the script exits with when a
# stop left no checkpoint newer than the one the job started from
EXIT_STOPPED_UNSAVED = 4
MAX_SIGNAL_TIME = 65535  # sbatch --signal: "sig_time must be an integer between 0 and 65535"
NO_TIME_LIMIT = ("UNLIMITED", "INFINITE")
_FORMS = "MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (0 or UNLIMITED: none)"
_DAYS = re.compile(r"^(\d+)-(\d+)(?::(\d+))?(?::(\d+))?$")
_CLOCK = re.compile(r"^(\d+)(?::(\d+))?(?::(\d+))?$")


def _bad_time(text: str, why: str = "") -> LaunchError:
    return LaunchError(f"--time {text!r}: {why}expected a Slurm time limit: {_FORMS}")


def _sixty(text: str, *fields: str | None) -> list[int]:
    """The minute and second fields as numbers, each below 60."""
    values = [int(f) if f is not None else 0 for f in fields]
    if any(v >= 60 for v in values):
        raise _bad_time(text, "minutes and seconds go up to 59; ")
    return values


def time_limit_seconds(text: str) -> int | None:
    """--time as seconds; None for no limit (0, UNLIMITED, INFINITE). LaunchError naming the
    forms sbatch takes for anything else."""
    if text.upper() in NO_TIME_LIMIT:
        return None
    days = _DAYS.match(text)
    if days:
        d, h = int(days.group(1)), int(days.group(2))
        if h >= 24:
            raise _bad_time(text, "hours after DAYS- go up to 23; ")
        m, s = _sixty(text, days.group(3), days.group(4))
        seconds = ((d * 24 + h) * 60 + m) * 60 + s
    else:
        clock = _CLOCK.match(text)
        if not clock:
            raise _bad_time(text)
        first, second, third = clock.groups()
        if second is None:  # MINUTES
            seconds = int(first) * 60
        elif third is None:  # MINUTES:SECONDS
            seconds = int(first) * 60 + _sixty(text, second)[0]
        else:  # HOURS:MINUTES:SECONDS
            m, s = _sixty(text, second, third)
            seconds = (int(first) * 60 + m) * 60 + s
    return seconds or None


def check_limits(time: str | None, grace: int, max_restarts: int) -> None:
    """LaunchError, naming the flag, for a grace sbatch refuses or that does not fit the limit,
    and for a negative restart cap."""
    limit = time_limit_seconds(time) if time is not None else None
    if not 1 <= grace <= MAX_SIGNAL_TIME:
        raise LaunchError(
            f"--grace {grace}: expected the seconds before the time limit at which Slurm "
            f"signals the job, 1-{MAX_SIGNAL_TIME} (sbatch --signal=B:TERM@S)"
        )
    if limit is not None and grace >= limit:
        raise LaunchError(
            f"--grace {grace}: not shorter than --time {time} ({limit} s), so Slurm would "
            f"signal the job before it could train; give a --grace below {limit} or a longer "
            "--time"
        )
    if max_restarts < 0:
        raise LaunchError(
            f"--max-restarts {max_restarts}: expected how many times the job may requeue "
            "itself, 0 (never) or more"
        )
