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

"""A stand-in for a conductor's work on one node, for the lock test.

Run as its own process, with Ironic's configuration: it asks Ironic's
hash-ring manager (ours, installed as the launchers do) whom the node
belongs to, exactly as a conductor's periodic tasks do, and whenever the
answer is itself, takes Ironic's exclusive node lock and "works" for a
moment. It writes what it saw and did as JSON:

- ``views``: [seconds, owner] each time its view of the owner changed;
- ``worked``: [start, end] of each period it held the lock and worked;
- ``locked_out``: times Ironic refused the lock (NodeLocked).

Times are wall-clock (time.time()), comparable between processes here.
"""

import argparse
import json
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument('--config-file', action='append', default=[])
    parser.add_argument('--identity', required=True)
    parser.add_argument('--node', required=True)
    parser.add_argument('--seconds', type=float, required=True)
    parser.add_argument('--hold', type=float, default=0.3)
    parser.add_argument('--out', required=True)
    args = parser.parse_args(argv)

    from ironic_affinity.integration.ring import loader

    loader.install('the end-to-end lock worker')

    from ironic import objects
    from ironic.common import context as ironic_context
    from ironic.common import exception as ironic_exception
    from ironic.common import hash_ring
    from ironic.conductor import task_manager
    from ironic.conf import CONF

    config_args: list[str] = []
    for path in args.config_file:
        config_args += ['--config-file', path]
    CONF(config_args, project='ironic')
    # The reservation Ironic writes names CONF.host: the conductor this
    # worker stands for.
    CONF.set_override('host', args.identity)
    objects.register_all()
    context = ironic_context.get_admin_context()
    node = objects.Node.get(context, args.node)
    manager = hash_ring.HashRingManager()

    views: list[list[object]] = []
    worked: list[list[float]] = []
    locked_out: list[float] = []
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        try:
            ring = manager.get_ring(node.driver, node.conductor_group)
            owners = ring.get_nodes(node.uuid.encode('utf-8'))
        except ironic_exception.IronicException:
            owners = set()
        owner = next(iter(owners), None)
        if not views or views[-1][1] != owner:
            views.append([time.time(), owner])
            if len(views) == 1:
                print('ready: first owner %s' % owner, flush=True)
        if owner == args.identity:
            try:
                with task_manager.acquire(
                    context,
                    node.uuid,
                    shared=False,
                    retry=False,
                    load_driver=False,
                    purpose='affinity lock test',
                ):
                    start = time.time()
                    time.sleep(args.hold)
                    worked.append([start, time.time()])
            except ironic_exception.NodeLocked:
                locked_out.append(time.time())
        time.sleep(0.05)
    with open(args.out, 'w') as handle:
        json.dump(
            {'views': views, 'worked': worked, 'locked_out': locked_out},
            handle,
        )
    return 0


if __name__ == '__main__':
    sys.exit(main())
