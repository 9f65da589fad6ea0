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

"""Membership wired to configuration, as a service process uses it.

:class:`ConductorMembership` keeps a conductor in the group with the
profile its [affinity] options describe, and republishes it when the
options are reloaded (oslo.config mutate hooks run on SIGHUP). Building it
refuses a contradictory configuration before anything joins.
"""

from typing import Any

from oslo_config import cfg
from oslo_log import log

from ironic_affinity import conf as affinity_conf
from ironic_affinity import exception
from ironic_affinity import profile
from ironic_affinity.membership import backend
from ironic_affinity.membership import member
from ironic_affinity.membership import view

LOG = log.getLogger(__name__)


def member_view(conf: cfg.ConfigOpts) -> view.MemberView:
    """A view of the group as configured (not started)."""
    group = conf.affinity
    return view.MemberView(
        backend.backend_url(conf),
        group.group_name,
        group.watch_interval,
        group.member_timeout,
    )


class ConductorMembership:
    """This conductor's place in the group, following its configuration."""

    def __init__(
        self,
        conf: cfg.ConfigOpts,
        name: str,
        hardware_types: frozenset[str] | None = None,
        conductor_group: str = '',
    ) -> None:
        self.conf = conf
        self.name = name
        self.hardware_types = hardware_types
        self.conductor_group = conductor_group
        current = self._profile()
        group = conf.affinity
        self.member = member.Member(
            backend.backend_url(conf),
            group.group_name,
            current,
            group.heartbeat_interval,
            group.member_timeout,
        )

    def _profile(self) -> profile.ConductorProfile:
        current = affinity_conf.conductor_profile(
            self.conf, self.name, self.hardware_types, self.conductor_group
        )
        conflicts = current.soft_conflicts()
        if conflicts:
            LOG.warning(
                '[affinity]soft_affinity_tags and soft_anti_affinity_tags '
                'both contain %(tags)s; soft_anti_affinity_tags wins',
                {'tags': ', '.join(sorted(conflicts))},
            )
        return current

    def start(self) -> None:
        self.conf.register_mutate_hook(self._reloaded)
        self.member.start()

    def stop(self) -> None:
        self.member.stop()

    def _reloaded(self, conf: cfg.ConfigOpts, changed: Any) -> None:
        # A bad new value is refused and the last good profile stays
        # published: a typo on SIGHUP must not unplace this conductor.
        try:
            updated = self._profile()
        except (exception.AffinityError, cfg.Error, ValueError) as exc:
            LOG.error(
                'Reloaded [affinity] options refused, keeping the previous '
                'affinity profile: %(error)s',
                {'error': exc},
            )
            return
        LOG.info(
            'Affinity profile of conductor %(name)s reloaded',
            {'name': self.name},
        )
        self.member.update(updated)
