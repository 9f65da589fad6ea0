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

"""JSON patches applied by the library Ironic applies them with.

The door checks what a node update would store by applying the patch
itself; with the same library (installed with Ironic), an operation
means here exactly what it will mean to Ironic.
"""

from typing import Any

import jsonpatch

from ironic_affinity.integration.api import door

# What stops Ironic's own application of a patch (Ironic catches the
# same): the patch then fails there too, and Ironic says why.
_PATCH_ERRORS = (
    jsonpatch.JsonPatchException,
    jsonpatch.JsonPointerException,
    KeyError,
    IndexError,
    TypeError,
    ValueError,
)


def apply_patch(document: Any, patch: list[Any]) -> Any:
    """The document patched, or PatchFailed saying why it cannot be."""
    try:
        return jsonpatch.apply_patch(document, patch)
    except _PATCH_ERRORS as exc:
        raise door.PatchFailed(str(exc)) from exc
