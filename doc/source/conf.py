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

"""Sphinx configuration of the ironic-affinity documentation."""

import os
import sys

# Our own extensions (placement-graph), beside this file.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), '_ext'))

project = 'ironic-affinity'
copyright = 'the ironic-affinity developers'

extensions = [
    # ``.. show-options::`` renders the [affinity] option reference.
    'oslo_config.sphinxext',
    # Runs oslo-config-generator at build time: the sample is never
    # written by hand. The path is relative to this directory.
    'oslo_config.sphinxconfiggen',
    # ``.. placement-graph::`` draws a node's placement, computed by the
    # engine at build time (graphviz's dot must be installed).
    'placement_graph',
]
graphviz_output_format = 'svg'

config_generator_config_file = (
    '../../tools/config/ironic-affinity-config-generator.conf'
)
sample_config_basename = '_static/ironic-affinity'

exclude_patterns = ['_build']
html_static_path = ['_static']
