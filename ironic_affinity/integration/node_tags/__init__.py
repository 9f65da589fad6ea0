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

"""Every node's affinity tags, from Ironic's database to each process.

Ironic asks for a node's conductor by uuid alone, many times a second,
so each process holds uuid -> facts (hardware type, conductor group,
tags, creation time) in memory. The path of a tag, in the order it
travels:

* ``change_notices``: an API process notes each node it wrote, in its
  entry of the API group;
* ``tag_reader``: one process of the deployment, the holder of a tooz
  lock, reads the nodes table (``integration/data/ironic_db.py``): every
  node when it takes the lock and every ``[affinity]
  node_tags_rescan_interval``, and in between only the nodes noted;
* ``node_facts``: each row becomes one line of text, and back;
* ``tag_board``: the holder publishes the texts in 256 buckets with an
  index of their digests, on the coordination backend;
* ``tag_follower``: every other process reads the index every
  ``[affinity]node_tags_interval`` and only the buckets that changed;
* ``fresh_nodes``: a node a process does not hold yet is read from its
  row, and a node an API process is creating is placed by the tags of
  its request;
* ``tag_cache``: the one object the rest of the plugin holds; it runs
  the refreshes in a thread, takes a role at each, and answers lookups.

How fresh a process's tags are, and which mechanism gives which bound:

* a write through Ironic's API: in the writing process at once
  (``fresh_nodes``), everywhere within about two ``node_tags_interval``
  (the notice, the holder's read, the others' read of the index);
* a node no process holds yet: read from its row on its first lookup
  (``fresh_nodes``), so hard tags already in the database are obeyed
  from the first lookup;
* any other committed change (inspection rules in a conductor, a direct
  edit of the database), which no notice announces: within
  ``node_tags_rescan_interval`` plus one full read plus one
  ``node_tags_interval``, by the holder's full re-read.

Each is needed: without notices an API write would wait for the rescan;
without the read-through a new node would be placed without its tags;
without the rescan a change made outside the API would never arrive.
When the holder dies, another process takes the lock within the member
timeout. While the backend does not answer, a process keeps the tags it
has, with one warning; the database's outages are the holder's alone to
see. The figures are in doc/source/admin/ironic.rst.
"""
