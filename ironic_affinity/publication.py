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

"""What a conductor publishes about itself, at each heartbeat.

From what it published before, what its options say, where the
deployment stands between Ironic's ring and affinity (the agreement),
its vote and the moment: the profile with the changes nodes still follow
(:mod:`ironic_affinity.rollout`) and, when there is one to publish, its
vote and the switches it knows (:mod:`ironic_affinity.adoption`). Pure:
membership only encodes and carries the result.
"""

import dataclasses

from ironic_affinity import adoption
from ironic_affinity import profile
from ironic_affinity import rollout


@dataclasses.dataclass(frozen=True)
class Settings:
    """A conductor's options that shape what it publishes."""

    # [affinity]rebalance_period: 0 moves every node at once.
    rebalance_period: float
    # Whether the operator set [affinity]adoption_period: a running
    # switch with another period is then recorded again with the vote's.
    adoption_period_set: bool
    # Seconds from recording a switch to its start: the member timeout,
    # within which every process reads the group (or stands down).
    lead: float


@dataclasses.dataclass(frozen=True)
class Publication:
    """What to publish now, and the history to keep for the next beat."""

    profile: profile.ConductorProfile
    history: tuple[adoption.Switch, ...]
    # Switches this conductor recorded at this beat, as the recorder.
    recorded: tuple[adoption.Switch, ...]


def compose(
    previous: profile.ConductorProfile | None,
    configured: profile.ConductorProfile,
    vote: adoption.Vote,
    history: tuple[adoption.Switch, ...],
    agreement: adoption.Agreement | None,
    settings: Settings,
    now: float,
) -> Publication:
    """What a conductor publishes at ``now``.

    :param previous: what it published last, with its changes; None
        when it joins the group.
    :param vote: its side, since when, and the period it gives a switch
        it records: ``[affinity]adoption_period``, or one sized to what
        Ironic's takeover absorbs while that is unset.
    :param history: the switches it published last.
    :param agreement: where its process sees the deployment; None before
        it knows, which records nothing.
    """
    composed = rollout.compose(
        previous, configured, now, settings.rebalance_period
    )
    recorded: tuple[adoption.Switch, ...] = ()
    if agreement is not None:
        before = history
        history = adoption.recorded(
            agreement,
            configured.name,
            history,
            now,
            settings.lead,
            vote.period,
            repace=settings.adoption_period_set,
        )
        recorded = tuple(
            sorted(
                set(history) - set(before) - set(agreement.record),
                key=lambda s: s.at,
            )
        )
    # A conductor that only ever placed by affinity publishes no switch
    # entry: absent is affinity.
    if vote.side != adoption.AFFINITY or history:
        composed = dataclasses.replace(
            composed, switching=adoption.Published(vote, history)
        )
    return Publication(composed, history, recorded)
