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

from hypothesis import settings

# No time limit on one example: CI runs these beside the end-to-end
# suites on two cores, where a 0.2 ms example once took 396 ms and failed
# Hypothesis's default 200 ms deadline. Timing is shown by the benchmarks
# in tools/, not by unit tests. Loaded before any test module is
# imported, so that every @settings inherits it.
settings.register_profile('ironic_affinity', deadline=None)
settings.load_profile('ironic_affinity')
