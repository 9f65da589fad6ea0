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

"""``.. placement-graph:: SCENARIO NODE``: where a node goes and why, drawn.

The placement engine judges the node over the scenario's conductors at
build time (through the same report ``ironic-affinity explain``
prints), and the verdicts become a graphviz figure: the node, an edge to
each conductor labelled with its score and the tags that made it, or
with the reason it is excluded, the chosen conductor in bold, and the
fallback order numbered. The figure cannot drift from the code.

Options: ``:down: NAME[, NAME...]`` treats conductors as dead.
"""

import os

from docutils.parsers.rst import directives
from sphinx.ext import graphviz
from sphinx.util.docutils import SphinxDirective

from ironic_affinity import report
from ironic_affinity import scenario


def _quote(text):
    # Labels keep their graphviz line breaks (backslash n); names and
    # tags never hold a backslash (the tag grammar), only quotes matter.
    return '"%s"' % str(text).replace('"', '\\"')


def dot_source(result):
    """Graphviz source for one ``report.explain`` result."""
    order = {name: i + 1 for i, name in enumerate(result['fallback'])}
    tags = ', '.join(result['tags']) or 'no tags'
    lines = [
        'digraph placement {',
        '  rankdir=LR; nodesep=0.25;',
        '  node [shape=box, style="rounded", fontname="sans-serif", '
        'fontsize=11];',
        '  edge [fontname="sans-serif", fontsize=10];',
        '  node_ [label=%s, shape=ellipse, style=filled, '
        'fillcolor="#e8eef7"];' % _quote('%s\\n(%s)' % (result['node'], tags)),
    ]
    for index, row in enumerate(result['conductors']):
        name = 'c%d' % index
        verdict = row['verdict']
        if verdict in ('down', 'excluded'):
            label = row.get('reason') or verdict
            node_style = (
                'style="rounded,dashed", color=gray50, fontcolor=gray40'
            )
            edge_style = 'style=dashed, color=gray60, fontcolor=gray40'
        else:
            detail = ', '.join('%s %+d' % (t, w) for t, w in row['breakdown'])
            label = 'score %d%s' % (
                row['score'],
                ' (%s)' % detail if detail else '',
            )
            if verdict == 'chosen':
                node_style = (
                    'style="rounded,filled,bold", '
                    'fillcolor="#d9f2d9", penwidth=2'
                )
                edge_style = 'style=bold, penwidth=2, color="#2e7d32"'
            else:
                node_style = 'style="rounded"'
                edge_style = 'color="#555555"'
        title = row['conductor']
        if title in order:
            title = '%d. %s' % (order[title], title)
        lines.append(
            '  %s [label=%s, %s];'
            % (name, _quote(title + '\\n' + verdict), node_style)
        )
        lines.append(
            '  node_ -> %s [label=%s, %s];' % (name, _quote(label), edge_style)
        )
    lines.append('}')
    return '\n'.join(lines)


class PlacementGraph(SphinxDirective):
    required_arguments = 2
    option_spec = {'down': directives.unchanged, 'alt': directives.unchanged}

    def run(self):
        path = os.path.join(
            os.path.dirname(self.env.srcdir), '..', self.arguments[0]
        )
        path = os.path.normpath(path)
        self.env.note_dependency(path)
        loaded = scenario.load(path)
        down = {
            name.strip()
            for name in self.options.get('down', '').split(',')
            if name.strip()
        }
        result = report.explain(
            loaded.conductors, loaded.node(self.arguments[1]), down
        )
        figure = graphviz.graphviz()
        figure['code'] = dot_source(result)
        figure['options'] = {'docname': self.env.docname}
        figure['alt'] = self.options.get(
            'alt', 'Where %s goes and why' % self.arguments[1]
        )
        return [figure]


def setup(app):
    app.setup_extension('sphinx.ext.graphviz')
    app.add_directive('placement-graph', PlacementGraph)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
