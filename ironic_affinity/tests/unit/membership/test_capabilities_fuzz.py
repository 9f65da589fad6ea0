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

"""Capabilities published by other members are untrusted: fuzz the decoder.

Whatever a member publishes, decoding either gives a profile that obeys
the tag grammar or raises InvalidCapabilities: never another exception,
which would break the view thread for every member.
"""

import json

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from ironic_affinity import exception
from ironic_affinity import profile
from ironic_affinity.membership import capabilities
from ironic_affinity.tests import base
from ironic_affinity.tests import unit

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=80),
    st.binary(max_size=40),
)
_JSONISH = st.recursive(
    _SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=6),
        st.dictionaries(st.text(max_size=20), children, max_size=6),
    ),
    max_leaves=40,
)
_KEYS = st.sampled_from(
    ('format', 'hardware_types', 'conductor_group') + profile.TAG_OPTIONS
)
# Mostly well-formed documents with one field gone wrong, which reach
# deeper into the decoder than random noise does.
_NEAR_VALID = st.dictionaries(_KEYS, _JSONISH, max_size=7).map(
    lambda d: dict({'format': 1}, **d)
)


class CapabilitiesFuzzTestCase(base.TestCase):
    def _decodes_or_refuses(self, raw):
        try:
            decoded = capabilities.decode('member', raw)
        except exception.InvalidCapabilities as exc:
            self.assertLess(len(str(exc)), 1000)
            return
        # A profile: re-encoding gives valid capabilities again.
        self.assertEqual(
            decoded,
            capabilities.decode('member', capabilities.encode(decoded)),
        )

    @settings(max_examples=unit.examples(400), deadline=None)
    @given(_JSONISH)
    def test_anything(self, raw):
        self._decodes_or_refuses(raw)

    @settings(max_examples=unit.examples(400), deadline=None)
    @given(_NEAR_VALID)
    def test_near_valid(self, raw):
        self._decodes_or_refuses(raw)

    @settings(max_examples=unit.examples(200), deadline=None)
    @given(st.binary(max_size=200))
    def test_bytes(self, raw):
        self._decodes_or_refuses(raw)

    @settings(max_examples=unit.examples(200), deadline=None)
    @given(_NEAR_VALID)
    def test_as_json_text(self, raw):
        try:
            text = json.dumps(raw)
        except (TypeError, ValueError):
            return
        self._decodes_or_refuses(text)
