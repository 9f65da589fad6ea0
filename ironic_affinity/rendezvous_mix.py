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

"""The 64-bit mixing function of rendezvous weights, as constants.

Both ways of computing weights read them from here: plain integers
(:mod:`ironic_affinity.rendezvous`) and numpy
(:mod:`ironic_affinity.rendezvous_vector`). Two copies could drift, and
every process must compute the same weights; one module that each
imports keeps them one, with no import between the two.

The constants are the finaliser of MurmurHash3's 64-bit variant: a
bijection on 64-bit integers in which every input bit affects every
output bit.
"""

MASK64 = (1 << 64) - 1
C1 = 0xFF51AFD7ED558CCD
C2 = 0xC4CEB9FE1A85EC53
SHIFT = 33
