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

"""A process that takes the node tags reader's lock, publishes one
bucket, says so on stdout and then keeps the lock, refreshing it as the
node tag cache does, until it is killed."""

import argparse
import sys
import time

from ironic_affinity.integration.node_tags import board_format
from ironic_affinity.integration.node_tags import tag_board


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument('--url', required=True)
    parser.add_argument('--group', required=True)
    parser.add_argument('--timeout', type=int, default=5)
    args = parser.parse_args()
    board = tag_board.TagBoard(args.url, args.group, 'holder', args.timeout)
    while not board.try_lead():
        time.sleep(0.2)
    digests = [board_format.EMPTY_DIGEST] * board_format.BUCKETS
    digests[7] = board_format.digest({'n': 'a'})
    board.publish({7: {'n': 'a'}}, digests)
    print('leading', flush=True)
    while board.try_lead():
        time.sleep(1.0)
    return 1


if __name__ == '__main__':
    sys.exit(main())
