"""The README's python code blocks, section by section, for the tests that run them as written."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def section_blocks(title):
  text = README.read_text()
  section = text[text.index(f"## {title}"):]
  section = section[:section.index("\n## ", 3)]
  return re.findall(r"```python\n(.*?)```", section, flags=re.S)
