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

"""What the launchers read of Ironic's conductor service as it stops."""

from ironic_affinity.integration import launchers
from ironic_affinity.tests import base


class Before2026:
    """Ironic up to 2025.2: an attribute, cleared by SIGUSR1."""

    def __init__(self):
        self.deregister = True


class Since2026:
    """Ironic 2026.1: a property over a flag shared by its processes."""

    flag = True

    @property
    def deregister_on_shutdown(self):
        return self.flag


class DeregistersTestCase(base.TestCase):
    def test_each_release_says_whether_it_deregisters(self):
        old = Before2026()
        self.assertTrue(launchers._deregisters(old))
        old.deregister = False
        self.assertFalse(launchers._deregisters(old))
        new = Since2026()
        self.assertTrue(launchers._deregisters(new))
        new.flag = False
        self.assertFalse(launchers._deregisters(new))
        # Neither: deregistered, as Ironic does by default.
        self.assertTrue(launchers._deregisters(object()))
