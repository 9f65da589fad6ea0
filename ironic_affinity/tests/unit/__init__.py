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

import os

from hypothesis import settings

# The share of each property test's examples to run (0 < share <= 1):
# the gate runs the other Pythons at a fifth, where what differs between
# interpreters shows in a few examples, and the full search once, on the
# README's Python (doc/source/contributor/ci.rst).
SHARE_VARIABLE = 'IRONIC_AFFINITY_EXAMPLES_SHARE'


def _share():
    text = os.environ.get(SHARE_VARIABLE, '1')
    try:
        share = float(text)
    except ValueError:
        share = None
    if share is None or not 0 < share <= 1:
        raise ValueError(
            '%s must be a number above 0 and at most 1, not %r'
            % (SHARE_VARIABLE, text)
        )
    return share


_SHARE = _share()


def examples(count):
    """``count`` examples, or the share of them the run asks for."""
    return max(1, round(count * _SHARE))


# No time limit on one example: CI runs these beside the end-to-end
# suites on two cores, where a 0.2 ms example once took 396 ms and failed
# Hypothesis's default 200 ms deadline. Timing is shown by the benchmarks
# in tools/, not by unit tests. Loaded before any test module is
# imported, so that every @settings inherits it.
settings.register_profile(
    'ironic_affinity', deadline=None, max_examples=examples(100)
)
settings.load_profile('ironic_affinity')
