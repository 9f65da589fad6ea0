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

"""How results leave the command: one JSON object, or tables."""

import json
import sys
from typing import Any

from ironic_affinity import exception
from ironic_affinity._i18n import _


def emit(data: dict[str, Any], text: str, fmt: str) -> None:
    """Print ``data`` as sorted JSON, or ``text`` for a table."""
    if fmt == 'json':
        json.dump(data, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write('\n')
    else:
        print(text)


def check_down(names: frozenset[str], down: list[str], where: str) -> None:
    """Refuse --down names that are no conductor of ``where``."""
    unknown = sorted(set(down) - names)
    if unknown:
        raise exception.InvalidScenario(
            _('%(where)s: --down names no conductor: %(names)s')
            % {'where': where, 'names': ', '.join(unknown)}
        )
