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

"""Parts of the documentation's pages, for tests that hold the docs to
the code."""

import pathlib
import re

DOCS = pathlib.Path(__file__).resolve().parents[3] / 'doc' / 'source'

_LITERAL = re.compile(r'``([^`]+)``')


def read(page: str) -> str:
    """The text of a page under doc/source."""
    return (DOCS / page).read_text()


def between(text: str, start: str, end: str | None) -> str:
    """The text from the first ``start`` to the next ``end`` after it (to
    the end without one); an error naming what is missing."""
    begin = text.index(start)
    if end is None:
        return text[begin:]
    return text[begin : text.index(end, begin + len(start))]


def literals(text: str) -> set[str]:
    """Every inline literal of ``text``, and each word of a literal that
    is several (``{"from", "to"}`` gives from and to)."""
    found = set()
    for literal in _LITERAL.findall(text):
        found.add(literal)
        found.update(re.findall(r'[A-Za-z_][A-Za-z0-9_]*', literal))
    return found
